package allocator

import (
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// FileID identifies a file by what the kernel places uprobes on: its
// device and inode. Size and modification time guard the caches below
// against a file replaced in place.
type FileID struct {
	Dev, Ino uint64
	Size     int64
	Mtime    int64
}

// Identify stats path (following /proc/PID/root and map_files links).
func Identify(path string) (FileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, fmt.Errorf("stat %s: no device and inode", path)
	}
	return FileID{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano()}, nil
}

// The whole-host mode reads the modules of every process on the host, and
// most share a few files (libc, libstdc++): what is read from an ELF file
// is kept per FileID, so that each is parsed once. Bounded: past
// maxCached entries the cache starts afresh.
const maxCached = 4096

type symKey struct {
	id    FileID
	exe   bool
	names string // the set of names looked for
}

type symResult struct {
	syms map[string]symbol
	err  error
}

type dynInfo struct {
	soname string
	needed []string
}

var cache = struct {
	sync.Mutex
	syms map[symKey]symResult
	dyn  map[FileID]dynInfo
}{syms: map[symKey]symResult{}, dyn: map[FileID]dynInfo{}}

// nameKey is a canonical string for a set of names.
func nameKey(wanted map[string]bool) string {
	names := make([]string, 0, len(wanted))
	for n := range wanted {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, "\x00")
}

// cachedFunctions is definedFunctions, read once per file.
func cachedFunctions(path string, exe bool, wanted map[string]bool, key string) (map[string]symbol, error) {
	id, err := Identify(path)
	if err != nil {
		return definedFunctions(path, exe, wanted)
	}
	k := symKey{id, exe, key}
	cache.Lock()
	r, ok := cache.syms[k]
	cache.Unlock()
	if ok {
		return r.syms, r.err
	}
	syms, err := definedFunctions(path, exe, wanted)
	cache.Lock()
	if len(cache.syms) >= maxCached {
		clear(cache.syms)
	}
	cache.syms[k] = symResult{syms, err}
	cache.Unlock()
	return syms, err
}

// dynamic returns a shared object's DT_SONAME and DT_NEEDED, read once per file.
func dynamic(path string) dynInfo {
	id, err := Identify(path)
	if err == nil {
		cache.Lock()
		d, ok := cache.dyn[id]
		cache.Unlock()
		if ok {
			return d
		}
	}
	var d dynInfo
	if f, err := openELF(path); err == nil && !symbolize.TablesFit(f, elf.SHT_DYNAMIC) {
		f.Close()
	} else if err == nil {
		d.needed, _ = f.ImportedLibraries()
		if s, _ := f.DynString(elfSoname); len(s) > 0 {
			d.soname = s[0]
		}
		f.Close()
	}
	if err == nil {
		cache.Lock()
		if len(cache.dyn) >= maxCached {
			clear(cache.dyn)
		}
		cache.dyn[id] = d
		cache.Unlock()
	}
	return d
}
