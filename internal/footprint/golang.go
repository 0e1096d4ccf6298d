package footprint

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/memtrace/memtrace/internal/allocator"
)

// A Go program's heap is no malloc's: the runtime maps it with raw mmap
// syscalls, in heap arenas of 64 MiB (linux/amd64), each reserved whole
// and aligned, at hint addresses from 0x00c000000000 up (randomized since
// Go 1.26), and commits them piecewise. The
// runtime keeps the list of its arenas in mheap_.allArenas, a slice of
// arena indices; mheap_ is found by the executable's symbol table and read
// through /proc/PID/mem. Everything else the runtime maps anonymously
// (span and arena metadata, GC bitmaps, the page allocator's summaries)
// lies outside the arenas. Goroutine stacks, and the g0 stacks of the
// threads the runtime starts itself, are allocated from heap spans: they
// are part of the Go heap.
const (
	heapArenaBytes   = 64 << 20           // heapArenaBytes on linux/amd64
	arenaBaseOffset  = 0xffff800000000000 // arenaBaseOffset on amd64: arena index 0's address
	userSpaceEnd     = 1 << 47            // x86-64's user address space (4-level page tables)
	maxArenas        = 1 << 16            // a list longer than 4 TiB of heap is no arena list
	maxMheap         = 1 << 20            // bytes of mheap_ scanned for the list
	goExeCacheLimit  = 256                // executables remembered (whole host sees many)
	elfPhdrAuxvEntry = 3                  // AT_PHDR
)

// Reading.GoHeapSource's values: the arenas come from the runtime's own
// list (exact), or from the mappings' alignment (a heuristic, for an
// executable without a symbol table).
const (
	GoHeapFromRuntime   = "runtime"
	GoHeapFromAddresses = "addresses"
)

// goExe is what a reading needs of a Go executable: where mheap_ lies at
// link time and where the program headers do (to find a PIE's load bias).
type goExe struct {
	mheap, mheapSize uint64 // 0 when the symbol table is stripped
	// allArenas is the offset in mheap_ where the list was last found
	// (+1; 0: not yet): the same for every process of the executable, so
	// that a reading reads one slice header instead of scanning mheap_.
	allArenas atomic.Uint64
	phdr      uint64 // the program headers' link-time address; 0 for ET_EXEC
}

// goExes caches goExe by executable (nil: not a Go program), keyed by the
// file's identity so that a rebuilt binary is read again.
var goExes = struct {
	sync.Mutex
	m map[allocator.FileID]*goExe
}{m: map[allocator.FileID]*goExe{}}

// GoProgram says whether process pid runs a Go executable (x86-64).
func GoProgram(pid int) bool { return goProgram("/proc/"+strconv.Itoa(pid)) != nil }

// goProgram says whether the process in dir runs a Go executable, and
// what a reading needs of it.
func goProgram(dir string) *goExe {
	id, err := allocator.Identify(dir + "/exe")
	if err != nil {
		return nil
	}
	goExes.Lock()
	g, ok := goExes.m[id]
	goExes.Unlock()
	if !ok {
		g = readGoExe(dir + "/exe")
		goExes.Lock()
		if len(goExes.m) >= goExeCacheLimit {
			clear(goExes.m)
		}
		goExes.m[id] = g
		goExes.Unlock()
	}
	return g
}

// readGoExe reads an executable's ELF headers and symbol table: a Go
// program has a .go.buildinfo section. Only x86-64 is known. go test and
// go run strip their binaries' symbol tables by default.
func readGoExe(path string) *goExe {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || f.Section(".go.buildinfo") == nil {
		return nil
	}
	g := &goExe{}
	if f.Type == elf.ET_DYN {
		g.phdr = phdrAddress(f)
	}
	syms, err := f.Symbols()
	if err != nil {
		return g // stripped: the arenas are found by their addresses
	}
	for _, s := range syms {
		if s.Name == "runtime.mheap_" {
			g.mheap, g.mheapSize = s.Value, min(s.Size, maxMheap)
			break
		}
	}
	return g
}

// phdrAddress is the link-time address of the program headers: the
// loaded segment that holds them, at their offset.
func phdrAddress(f *elf.File) uint64 {
	const off = 64 // e_phoff as linkers write ELF64 files (debug/elf hides it)
	for _, p := range f.Progs {
		if p.Type == elf.PT_PHDR {
			return p.Vaddr
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= off && off < p.Off+p.Filesz {
			return p.Vaddr + off - p.Off
		}
	}
	return 0
}

// loadBias is how far a PIE was loaded from its link-time addresses, from
// the AT_PHDR the kernel gave the process.
func loadBias(dir string, g *goExe) (uint64, error) {
	if g.phdr == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(dir + "/auxv")
	if err != nil {
		return 0, err
	}
	for i := 0; i+16 <= len(b); i += 16 {
		if binary.LittleEndian.Uint64(b[i:]) == elfPhdrAuxvEntry {
			return binary.LittleEndian.Uint64(b[i+8:]) - g.phdr, nil
		}
	}
	return 0, errors.New("auxv: no AT_PHDR")
}

// goHeap is a Go program's heap as a reading finds it: its arenas, sorted
// and merged, and how they were found.
type goHeap struct {
	arenas []Range
	source string // GoHeapFromRuntime or GoHeapFromAddresses
}

// findGoHeap finds the arenas of a Go program: from the runtime's own
// list when mheap_ can be read, else by the hint addresses.
func findGoHeap(dir string, g *goExe, vmas []vma, mem memory) *goHeap {
	if g.mheap != 0 {
		if bias, err := loadBias(dir, g); err == nil {
			if a := g.runtimeArenas(g.mheap+bias, vmas, mem); a != nil {
				return &goHeap{arenas: a, source: GoHeapFromRuntime}
			}
		}
	}
	return &goHeap{arenas: alignedArenas(vmas), source: GoHeapFromAddresses}
}

// runtimeArenas reads mheap_.allArenas. The field's offset changes with
// Go's versions and no DWARF may be there to say it, so mheap_ is scanned
// for slice headers (pointer, length, capacity) whose every element is the
// index of an arena the kernel has mapped, all of it, as anonymous memory.
// The runtime's other slices of arena indices (sweepArenas, markArenas)
// are snapshots of allArenas, which only grows on 64-bit, and are declared
// after it: the longest list is taken, the first of equals, and where it
// was found serves the executable's next readings. A slice of anything else fails on its first element: pointers
// and small numbers are no index of mapped user memory. nil when none is
// found.
func (g *goExe) runtimeArenas(addr uint64, vmas []vma, mem memory) []Range {
	if off := g.allArenas.Load(); off > 0 {
		var b [24]byte
		if mem.read(b[:], addr+off-1) == nil {
			if a := sliceArenas(b[:], 0, vmas, mem); a != nil {
				return merge(a)
			}
		}
	}
	b := make([]byte, g.mheapSize&^7)
	if len(b) < 24 || mem.read(b, addr) != nil {
		return nil
	}
	var best []Range
	for o := 0; o+24 <= len(b); o += 8 {
		if a := sliceArenas(b, o, vmas, mem); len(a) > len(best) {
			best = a
			g.allArenas.Store(uint64(o) + 1)
		}
	}
	return merge(best)
}

// sliceArenas reads the slice whose header is at b[o:] as arena indices:
// nil if it is no such slice.
func sliceArenas(b []byte, o int, vmas []vma, mem memory) []Range {
	ptr := binary.LittleEndian.Uint64(b[o:])
	n := binary.LittleEndian.Uint64(b[o+8:])
	c := binary.LittleEndian.Uint64(b[o+16:])
	if ptr == 0 || ptr%8 != 0 || n == 0 || n > c || c > maxArenas {
		return nil
	}
	idx := make([]byte, 8*n)
	if mem.read(idx, ptr) != nil {
		return nil
	}
	return arenaRanges(idx, vmas)
}

// arenaRanges turns arena indices into address ranges, or nil if one is
// not an arena the kernel maps wholly as anonymous memory.
func arenaRanges(idx []byte, vmas []vma) []Range {
	out := make([]Range, 0, len(idx)/8)
	for i := 0; i < len(idx); i += 8 {
		start := binary.LittleEndian.Uint64(idx[i:])*heapArenaBytes + arenaBaseOffset
		if start >= userSpaceEnd-heapArenaBytes || !anonCovered(vmas, start, start+heapArenaBytes) {
			return nil
		}
		out = append(out, Range{start, start + heapArenaBytes})
	}
	return out
}

// anonCovered reports whether anonymous mappings cover [start, end)
// without a gap. vmas are sorted by address.
func anonCovered(vmas []vma, start, end uint64) bool {
	i := sort.Search(len(vmas), func(i int) bool { return vmas[i].end > start })
	for at := start; at < end; i++ {
		if i >= len(vmas) || vmas[i].start > at || !vmas[i].anonymous() || vmas[i].path != "" {
			return false
		}
		at = vmas[i].end
	}
	return true
}

// alignedArenas is the heuristic for a stripped executable: runs of
// adjacent anonymous mappings that begin and end on an arena boundary.
// The runtime reserves its heap a whole arena at a time, aligned (at
// addresses that Go 1.26 on randomizes), and commits it piecewise; its
// other reservations are not so aligned.
func alignedArenas(vmas []vma) []Range {
	var out []Range
	for i := 0; i < len(vmas); {
		j := i
		for j < len(vmas) && vmas[j].anonymous() && vmas[j].path == "" && (j == i || vmas[j].start == vmas[j-1].end) {
			j++
		}
		if j == i {
			i++
			continue
		}
		start, end := vmas[i].start, vmas[j-1].end
		if start%heapArenaBytes == 0 && end%heapArenaBytes == 0 {
			out = append(out, Range{start, end})
		}
		i = j
	}
	return out
}

// merge sorts ranges and joins the adjacent ones.
func merge(rs []Range) []Range {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].End >= r.Start {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// overlap returns the part of [start, end) inside the arenas: its bytes,
// and whether all of it is inside.
func (h *goHeap) overlap(start, end uint64) (n uint64, all bool) {
	if h == nil {
		return 0, false
	}
	i := sort.Search(len(h.arenas), func(i int) bool { return h.arenas[i].End > start })
	for ; i < len(h.arenas) && h.arenas[i].Start < end; i++ {
		n += min(end, h.arenas[i].End) - max(start, h.arenas[i].Start)
	}
	return n, n == end-start
}
