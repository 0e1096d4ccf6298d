package leakcheck

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	Perms      string // "rw-p"
	Offset     uint64
	Inode      uint64
	Path       string // "" for anonymous memory, "[stack]", a file's path
}

func (m Mapping) Readable() bool   { return len(m.Perms) > 0 && m.Perms[0] == 'r' }
func (m Mapping) Writable() bool   { return len(m.Perms) > 1 && m.Perms[1] == 'w' }
func (m Mapping) Executable() bool { return len(m.Perms) > 2 && m.Perms[2] == 'x' }
func (m Mapping) Shared() bool     { return len(m.Perms) > 3 && m.Perms[3] == 's' }

// FileBacked: a mapping of a file (valgrind's SkFileC), not anonymous
// memory or a kernel pseudo-mapping.
func (m Mapping) FileBacked() bool {
	return m.Inode != 0 && m.Path != "" && !strings.HasPrefix(m.Path, "[")
}

// Anonymous: memory with no file behind it (the kernel's [heap], [stack]
// and [anon:…] names included).
func (m Mapping) Anonymous() bool { return m.Inode == 0 }

// ParseMaps reads /proc/PID/maps.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps: %w", err)
	}
	slices.SortFunc(out, func(a, b Mapping) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return out, nil
}

func parseMapsLine(line string) (Mapping, error) {
	// start-end perms offset dev inode [path]
	f := strings.Fields(line)
	if len(f) < 5 {
		return Mapping{}, fmt.Errorf("maps: malformed line %q", line)
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	off, err3 := strconv.ParseUint(f[2], 16, 64)
	inode, err4 := strconv.ParseUint(f[4], 10, 64)
	if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || end < start {
		return Mapping{}, fmt.Errorf("maps: malformed line %q", line)
	}
	m := Mapping{Start: start, End: end, Perms: f[1], Offset: off, Inode: inode}
	if len(f) > 5 {
		// The path is the rest of the line after the inode: it may hold
		// spaces (and " (deleted)").
		idx := 0
		for i := 0; i < 5; i++ {
			idx += strings.Index(line[idx:], f[i]) + len(f[i])
		}
		m.Path = strings.TrimSpace(line[idx:])
	}
	return m, nil
}

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
