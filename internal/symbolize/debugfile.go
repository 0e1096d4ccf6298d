package symbolize

import (
	"bytes"
	"debug/elf"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"strings"

	"github.com/memtrace/memtrace/internal/procfile"
)

// A separate debug file holds the .symtab and DWARF that were stripped from
// a module (objcopy --only-keep-debug). Two conventions find it, as gdb
// does:
//
//   - by GNU build-id: DEBUGDIR/.build-id/xx/rest.debug, where xx are the
//     first two hex digits of the id. Debian's libc6-dbg and -dbgsym
//     packages install their files there. The file must carry the same
//     build-id.
//   - by .gnu_debuglink, a section naming the debug file and the CRC-32 of
//     its bytes: looked for in the module's directory, in its .debug/
//     subdirectory, and under DEBUGDIR/ followed by the module's
//     directory. The CRC must match.
//
// Paths are as the module's process sees them: for a process in another
// mount namespace or chroot, they are looked up under /proc/PID/root first.

// debugLink is the content of a .gnu_debuglink section.
type debugLink struct {
	name string
	crc  uint32
}

// maxDebugLinkBytes bounds the section: a file name and a CRC.
const maxDebugLinkBytes = 4096

// readDebugLink parses f's .gnu_debuglink: a NUL-terminated file name,
// padding to 4 bytes, then the CRC-32 in the file's byte order. A name that
// is not a plain file name (a path, "." or "..") is refused: the module
// comes from outside and must not make us read files elsewhere.
func readDebugLink(f *elf.File) (debugLink, bool) {
	s := f.Section(".gnu_debuglink")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size > maxDebugLinkBytes {
		return debugLink{}, false
	}
	b, err := s.Data()
	if err != nil {
		return debugLink{}, false
	}
	return parseDebugLink(b, f.ByteOrder)
}

func parseDebugLink(b []byte, order interface{ Uint32([]byte) uint32 }) (debugLink, bool) {
	n := bytes.IndexByte(b, 0)
	if n <= 0 {
		return debugLink{}, false
	}
	name := string(b[:n])
	at := align4(uint64(n + 1))
	if at+4 > uint64(len(b)) || !plainFileName(name) {
		return debugLink{}, false
	}
	return debugLink{name: name, crc: order.Uint32(b[at:])}, true
}

func plainFileName(name string) bool {
	return name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// debugFileKind says how a candidate was found, and so how it is checked.
type debugFileKind int

const (
	byBuildID debugFileKind = iota
	byDebugLink
)

// debugCandidate is a debug file found at open time, checked on first use.
type debugCandidate struct {
	file *os.File
	path string
	kind debugFileKind
	crc  uint32 // byDebugLink
}

// debugCandidatePaths lists, best first, where the debug file of a module
// with build-id id and debug link link (either may be empty) can be, for a
// module at modPath (as its process names it) and the global debug
// directories dirs. Each path is then tried under each root.
func debugCandidatePaths(id string, link debugLink, modPath string, dirs []string) []struct {
	path string
	kind debugFileKind
} {
	type cand = struct {
		path string
		kind debugFileKind
	}
	var out []cand
	if len(id) > 2 && isHex(id) {
		for _, d := range dirs {
			out = append(out, cand{path.Join(d, ".build-id", id[:2], id[2:]+".debug"), byBuildID})
		}
	}
	if link.name != "" && strings.HasPrefix(modPath, "/") {
		dir := path.Dir(modPath)
		out = append(out,
			cand{path.Join(dir, link.name), byDebugLink},
			cand{path.Join(dir, ".debug", link.name), byDebugLink})
		for _, d := range dirs {
			out = append(out, cand{path.Join(d, dir, link.name), byDebugLink})
		}
	}
	return out
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// findDebugFiles opens the debug files that exist for mod: for each
// candidate path, under each root ("" for our own). Only regular files are
// opened (a debug link must not make us read a FIFO or a device), and not
// the module's own file. Checking them (build-id, CRC) waits until the
// module's symbols or lines are first needed.
func findDebugFiles(mod *Module, modPath string, roots, dirs []string) []debugCandidate {
	link, _ := readDebugLink(mod.f)
	var self os.FileInfo
	if f, ok := mod.closer.(*os.File); ok {
		self, _ = f.Stat()
	}
	var out []debugCandidate
	seen := map[string]bool{}
	for _, c := range debugCandidatePaths(mod.buildID, link, modPath, dirs) {
		if len(out) == maxDebugCandidates {
			break
		}
		for _, root := range roots {
			p := root + c.path
			if seen[p] {
				continue
			}
			seen[p] = true
			// Resolved inside the root (procfile): links are followed,
			// as distributions install debug files behind them, but
			// cannot leave the process's root; the file is checked
			// against the build-id or the CRC before use.
			dir := root
			if dir == "" {
				dir = "/"
			}
			f, err := procfile.Open(dir, c.path, procfile.FollowInRoot, maxModuleBytes)
			if err != nil {
				continue
			}
			if fi, err := f.Stat(); err != nil || (self != nil && os.SameFile(fi, self)) {
				f.Close()
				continue
			}
			out = append(out, debugCandidate{file: f, path: p, kind: c.kind, crc: link.crc})
			break // this path found under one root is enough
		}
	}
	return out
}

// maxDebugCandidates bounds how many found debug files are kept open per
// module until checked.
const maxDebugCandidates = 4

// openDebugFile checks a candidate and returns it as an ELF file: a build-id
// candidate must carry the module's build-id, a debug link candidate must
// have the CRC the link names (and, when both have one, the same build-id).
func openDebugFile(c debugCandidate, want string) (*elf.File, error) {
	if c.kind == byDebugLink {
		h := crc32.NewIEEE()
		if _, err := io.Copy(h, io.NewSectionReader(c.file, 0, 1<<62)); err != nil {
			return nil, fmt.Errorf("debug file %s: %w", c.path, err)
		}
		if h.Sum32() != c.crc {
			return nil, fmt.Errorf("debug file %s: CRC %08x, the debug link wants %08x", c.path, h.Sum32(), c.crc)
		}
	}
	var ef *elf.File
	err := guard("debug file "+c.path, func() error {
		f, err := elf.NewFile(c.file)
		if err != nil {
			return err
		}
		id := buildID(f)
		switch {
		case c.kind == byBuildID && id != want:
			return fmt.Errorf("build-id %q, want %q", id, want)
		case id != "" && want != "" && id != want:
			return fmt.Errorf("build-id %q, the module has %q", id, want)
		}
		ef = f
		return nil
	})
	return ef, err
}
