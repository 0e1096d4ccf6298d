package leakcheck

import (
	"io"
	"strings"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Mapping is one line of /proc/PID/maps (procfs: a file's " (deleted)"
// is in Deleted, not in Path; shared anonymous memory is "/dev/zero").
type Mapping = procfs.Mapping

// ParseMaps reads /proc/PID/maps, sorted by address (procfs.ParseMaps).
func ParseMaps(r io.Reader) ([]Mapping, error) { return procfs.ParseMaps(r) }

// findMapping returns the mapping holding addr in ms (sorted).
func findMapping(ms []Mapping, addr uint64) (Mapping, bool) {
	l, h := 0, len(ms)
	for l < h {
		m := int(uint(l+h) >> 1)
		if ms[m].Start <= addr {
			l = m + 1
		} else {
			h = m
		}
	}
	if l == 0 || addr >= ms[l-1].End {
		return Mapping{}, false
	}
	return ms[l-1], true
}

// Thread is what the roots need of one thread: its stack pointer.
type Thread struct {
	SP uint64
}

// RootOptions say which memory is a root.
type RootOptions struct {
	// Threads' stacks are roots from their stack pointers up. A mapping
	// holding no known stack pointer is a root whole (the stacks of
	// threads whose registers are unknown).
	Threads []Thread
	// UnknownHeap makes the heap's memory outside the known live blocks a
	// root too: for a process attached to after it started (-p), the heap
	// holds blocks memtrace never saw allocated, and what they point to
	// must not be called lost. Conservative: freed memory counts too.
	UnknownHeap bool
	// Blocks are the live blocks, sorted by address (for UnknownHeap, and
	// to recognize the mappings the allocator keeps its blocks in).
	Blocks []Block
	// Mapped are the program's own anonymous mappings (its mmap calls
	// outside the allocator), sorted: roots even where the kernel merged
	// one with a mapping of the allocator's next to it (one line of
	// /proc/PID/maps), which holds a live block and so is heap.
	Mapped []Range
}

// glibcHeapMax is glibc's HEAP_MAX_SIZE on 64-bit: each non-main arena
// lives in heaps aligned to it.
const glibcHeapMax = 64 << 20

// Roots returns the ranges of the root set, as valgrind scans it: every
// readable and writable mapping of client memory — the modules' data and
// bss, anonymous memory, thread stacks (from the stack pointer up), shared
// memory — except the heap: the brk heap, glibc's arena heaps, and every
// mapping that holds a live block (an allocator's chunk or arena), less
// the parts of it that are the program's own mappings (opt.Mapped). Device
// mappings other than /dev/zero are skipped, as valgrind skips them. A
// module's relro (read-only after relocation, just before its writable
// data) is a root too, although valgrind does not scan it: it holds
// pointers set before main, never heap blocks in practice.
func Roots(ms []Mapping, opt RootOptions) []Range {
	var out []Range
	blocks := opt.Blocks
	for i, m := range ms {
		if !m.Readable() || m.End <= m.Start {
			continue
		}
		heap := isHeapMapping(ms, i, blocks)
		switch {
		case heap:
			if opt.UnknownHeap {
				out = append(out, gaps(Range{m.Start, m.End}, blocks)...)
				continue
			}
			for _, r := range opt.Mapped {
				if r.Start < m.End && m.Start < r.End {
					out = append(out, gaps(Range{max(r.Start, m.Start), min(r.End, m.End)}, blocks)...)
				}
			}
			continue
		case m.Path == "[vvar]" || m.Path == "[vsyscall]" || m.Path == "[vdso]" || m.Path == "[vvar_vclock]":
			continue
		case strings.HasPrefix(m.Path, "/dev/") && m.Path != "/dev/zero" && !strings.HasPrefix(m.Path, "/dev/shm/"):
			continue
		case !m.Writable() && !isRelro(ms, i):
			continue
		}
		r := Range{m.Start, m.End}
		// A stack is live from the lowest stack pointer in it up.
		sp, found := uint64(0), false
		for _, t := range opt.Threads {
			if t.SP >= m.Start && t.SP < m.End && (!found || t.SP < sp) {
				sp, found = t.SP, true
			}
		}
		if found {
			r.Start = sp &^ 7
		}
		out = append(out, r)
	}
	return out
}

// isRelro: a read-only private mapping of a file directly followed by a
// writable mapping of the same file (what ld.so leaves of the RELRO
// segment after mprotect).
func isRelro(ms []Mapping, i int) bool {
	m := ms[i]
	if !m.FileBacked() || m.Writable() || m.Executable() || m.Shared() || i+1 >= len(ms) {
		return false
	}
	n := ms[i+1]
	return n.Start == m.End && n.Writable() && n.Path == m.Path && n.Inode == m.Inode
}

// isHeapMapping: memory the allocator hands blocks out of.
func isHeapMapping(ms []Mapping, i int, blocks []Block) bool {
	m := ms[i]
	if m.Path == "[heap]" {
		return true
	}
	if !m.Anonymous() || m.Path == "[stack]" {
		return holdsBlock(m, blocks)
	}
	// A glibc arena heap: aligned to HEAP_MAX_SIZE, its reserve (---p)
	// right after it, or exactly that size.
	if m.Start%glibcHeapMax == 0 && m.Writable() {
		if m.End-m.Start == glibcHeapMax {
			return true
		}
		if i+1 < len(ms) && ms[i+1].Start == m.End && ms[i+1].Perms[:3] == "---" && ms[i+1].Anonymous() &&
			ms[i+1].End-m.Start <= glibcHeapMax {
			return true
		}
	}
	return holdsBlock(m, blocks)
}

// holdsBlock reports whether a live block starts in m.
func holdsBlock(m Mapping, blocks []Block) bool {
	l, h := 0, len(blocks)
	for l < h {
		mid := int(uint(l+h) >> 1)
		if blocks[mid].Addr < m.Start {
			l = mid + 1
		} else {
			h = mid
		}
	}
	return l < len(blocks) && blocks[l].Addr < m.End
}

// gaps returns the parts of r not covered by blocks (sorted).
func gaps(r Range, blocks []Block) []Range {
	var out []Range
	at := r.Start
	l, h := 0, len(blocks)
	for l < h {
		mid := int(uint(l+h) >> 1)
		if extent(blocks[mid].Addr, blocks[mid].Size) <= r.Start {
			l = mid + 1
		} else {
			h = mid
		}
	}
	for _, b := range blocks[l:] {
		if b.Addr >= r.End {
			break
		}
		if b.Addr > at {
			out = append(out, Range{at, b.Addr})
		}
		at = max(at, b.Addr+b.Size)
	}
	if at < r.End {
		out = append(out, Range{at, r.End})
	}
	return out
}
