// Package procfs parses what memtrace reads of a process in /proc:
// maps, smaps, status and pagemap. The rules about what a line means are
// decided here once, for every reader (symbolize, allocator, tracer,
// leakcheck, footprint, residency):
//
//   - A file's path is the rest of the line after the inode (it may hold
//     spaces). A " (deleted)" suffix on a file's path (the file was
//     removed or replaced while mapped: an upgraded library, shared
//     anonymous memory's "/dev/zero (deleted)") is removed and recorded
//     in Mapping.Deleted; a pseudo path ("[heap]") is kept whole.
//   - Mappings come sorted by address, as the kernel lists them.
//   - A line is a kernel VMA, not a call: the kernel merges neighbouring
//     mappings of the same kind into one line (a program's anonymous mmap
//     next to an allocator's arena, two mmaps of a file), and splits one
//     mapping when part of it changes (mprotect). What a program mapped
//     itself is known from its events, never from maps.
//
// Everything here is read from a process memtrace does not control: a
// malformed line is an error, never a panic.
package procfs

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64 // [Start, End) in the process's address space
	Offset     uint64 // file offset mapped at Start
	Perms      string // e.g. "r-xp"
	Dev        string // "major:minor", in hex as the kernel prints it
	Inode      uint64
	// Path is the mapped file, a pseudo path such as "[heap]" or "[vdso]",
	// or "" for an anonymous mapping. A " (deleted)" suffix is removed and
	// recorded in Deleted instead.
	Path    string
	Deleted bool
}

// Readable, Writable, Executable and Shared read the permissions.
func (m Mapping) Readable() bool   { return len(m.Perms) > 0 && m.Perms[0] == 'r' }
func (m Mapping) Writable() bool   { return len(m.Perms) > 1 && m.Perms[1] == 'w' }
func (m Mapping) Executable() bool { return len(m.Perms) > 2 && m.Perms[2] == 'x' }
func (m Mapping) Shared() bool     { return len(m.Perms) > 3 && m.Perms[3] == 's' }

// Anonymous reports whether no file is behind the memory (the kernel's
// [heap], [stack] and [anon:…] names included; shared anonymous memory
// has a shmem file's inode, and is not).
func (m Mapping) Anonymous() bool { return m.Inode == 0 }

// Pseudo reports whether Path names a kernel pseudo mapping ([vdso],
// [heap], ...) rather than a file.
func (m Mapping) Pseudo() bool { return strings.HasPrefix(m.Path, "[") }

// FileBacked reports whether the mapping has a file that can be opened.
func (m Mapping) FileBacked() bool {
	return m.Path != "" && !m.Pseudo() && m.Inode != 0
}

const deletedSuffix = " (deleted)"

// maxMapsLine bounds one line: a path is at most PATH_MAX (4096) bytes, so
// anything much longer is not maps text.
const maxMapsLine = 64 << 10

// ParseMaps parses the text of /proc/PID/maps, sorted by address. Blank
// lines are skipped.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxMapsLine)
	var out []Mapping
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("parse maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps after line %d: %w", n, err)
	}
	// The kernel's order, which a reader that searches may rely on
	// whatever the text.
	slices.SortStableFunc(out, func(a, b Mapping) int { return cmp.Compare(a.Start, b.Start) })
	return out, nil
}

// ReadMaps reads and parses /proc/PID/maps. A process that is gone, or a
// zombie whose address space is already released, gives an error that
// matches os.ErrNotExist.
func ReadMaps(pid int) ([]Mapping, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, goneOr(err)
	}
	defer f.Close()
	maps, err := ParseMaps(f)
	if err != nil {
		return nil, goneOr(err)
	}
	if len(maps) == 0 {
		return nil, fmt.Errorf("no mappings: %w", os.ErrNotExist)
	}
	return maps, nil
}

// goneOr makes "no such process" (ESRCH, returned when the process exits
// while its files are read) match os.ErrNotExist like ENOENT does.
func goneOr(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: %w", os.ErrNotExist, err)
	}
	return err
}

// parseMapsLine parses "start-end perms offset dev inode [path]". The path
// runs from the first non-blank after the inode to the end of the line, so
// it may hold spaces.
func parseMapsLine(line string) (Mapping, error) {
	return parseHeader(line)
}

// parseHeader parses a maps line, or the header line of a smaps entry.
func parseHeader(line string) (Mapping, error) {
	var m Mapping
	rest := line
	field := func(name string) (string, error) {
		rest = strings.TrimLeft(rest, " \t")
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			i = len(rest)
		}
		f := rest[:i]
		rest = rest[i:]
		if f == "" {
			return "", fmt.Errorf("missing %s", name)
		}
		return f, nil
	}

	rng, err := field("address range")
	if err != nil {
		return m, err
	}
	lo, hi, ok := strings.Cut(rng, "-")
	if !ok {
		return m, fmt.Errorf("address range %q: no '-'", rng)
	}
	if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, fmt.Errorf("start address: %w", err)
	}
	if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return m, fmt.Errorf("end address: %w", err)
	}
	if m.End < m.Start {
		return m, fmt.Errorf("address range %q ends before it starts", rng)
	}

	if m.Perms, err = field("permissions"); err != nil {
		return m, err
	}
	if len(m.Perms) != 4 {
		return m, fmt.Errorf("permissions %q: want 4 characters", m.Perms)
	}

	off, err := field("offset")
	if err != nil {
		return m, err
	}
	if m.Offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return m, fmt.Errorf("offset: %w", err)
	}

	if m.Dev, err = field("device"); err != nil {
		return m, err
	}
	if err := checkDev(m.Dev); err != nil {
		return m, err
	}

	ino, err := field("inode")
	if err != nil {
		return m, err
	}
	if m.Inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return m, fmt.Errorf("inode: %w", err)
	}

	m.Path = strings.TrimLeft(rest, " \t")
	if p, ok := strings.CutSuffix(m.Path, deletedSuffix); ok && !strings.HasPrefix(m.Path, "[") {
		m.Path, m.Deleted = p, true
	}
	return m, nil
}

var errBadDev = errors.New("want hex major:minor")

func checkDev(dev string) error {
	maj, min, ok := strings.Cut(dev, ":")
	if !ok {
		return fmt.Errorf("device %q: %w", dev, errBadDev)
	}
	if _, err := strconv.ParseUint(maj, 16, 32); err != nil {
		return fmt.Errorf("device %q: %w", dev, errBadDev)
	}
	if _, err := strconv.ParseUint(min, 16, 32); err != nil {
		return fmt.Errorf("device %q: %w", dev, errBadDev)
	}
	return nil
}

// GoneOr is goneOr for other readers of /proc/PID files (a process's mem).
func GoneOr(err error) error { return goneOr(err) }
