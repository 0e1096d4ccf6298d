package leakcheck

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Heuristics is a set of memcheck's interior-pointer heuristics: an
// interior pointer that one of them recognizes reaches its block as a
// start-pointer would.
type Heuristics uint8

// Heuristic is one heuristic (a Heuristics with one bit).
type Heuristic = Heuristics

const (
	// StdString: a pointer 3 words into a block laid out as the old
	// (copy-on-write) std::string rep: length, capacity, refcount, chars.
	StdString Heuristics = 1 << iota
	// Length64: a pointer 8 bytes into a block whose first 8 bytes hold
	// the block's size minus 8 (sqlite does this).
	Length64
	// NewArray: a pointer 8 bytes into a block whose first word is a
	// plausible element count (new[] of objects with a destructor).
	NewArray
	// MultipleInheritance: a pointer to a vtable pointer inside a block
	// that starts with a vtable pointer (a base class that is not first).
	MultipleInheritance

	// AllHeuristics is valgrind's default (--leak-check-heuristics=all).
	AllHeuristics = StdString | Length64 | NewArray | MultipleInheritance
)

var heuristicNames = []struct {
	h    Heuristics
	name string
}{
	{StdString, "stdstring"}, {Length64, "length64"}, {NewArray, "newarray"},
	{MultipleInheritance, "multipleinheritance"},
}

func (h Heuristics) String() string {
	switch h {
	case 0:
		return "none"
	case AllHeuristics:
		return "all"
	}
	var s []string
	for _, n := range heuristicNames {
		if h&n.h != 0 {
			s = append(s, n.name)
		}
	}
	return strings.Join(s, ",")
}

// ParseHeuristics parses valgrind's --leak-check-heuristics syntax.
func ParseHeuristics(s string) (Heuristics, error) {
	switch strings.TrimSpace(s) {
	case "all":
		return AllHeuristics, nil
	case "none":
		return 0, nil
	}
	var h Heuristics
	for _, f := range strings.Split(s, ",") {
		found := false
		for _, n := range heuristicNames {
			if strings.TrimSpace(f) == n.name {
				h |= n.h
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown heuristic %q: use stdstring, length64, newarray, multipleinheritance, all or none", f)
		}
	}
	return h, nil
}

// word reads the aligned word at addr.
func (c *checker) word(addr uint64) (uint64, bool) {
	var b [8]byte
	if n, _ := c.in.Mem.ReadAt(b[:], addr); n != 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// heuristic returns the heuristic by which the interior pointer ptr reaches
// block i, or 0 (memcheck's heuristic_reachedness, same order and tests).
func (c *checker) heuristic(ptr uint64, i int) Heuristic {
	set := c.in.Heuristics
	data, size := c.blk[i].Addr, c.blk[i].Size
	if set&StdString != 0 && ptr == data+24 {
		if capacity, ok := c.word(data + 8); ok && 24+capacity+1 == size {
			if length, ok := c.word(data); ok && length <= capacity {
				return StdString
			}
		}
	}
	if set&Length64 != 0 && ptr == data+8 {
		if n, ok := c.word(data); ok && n > 0 && size-8 == n {
			return Length64
		}
	}
	if set&NewArray != 0 && ptr == data+8 {
		if n, ok := c.word(data); ok && n > 0 && (size-8)%n == 0 {
			return NewArray
		}
	}
	if set&MultipleInheritance != 0 && ptr%8 == 0 && c.in.Maps != nil {
		inner, ok := c.word(ptr)
		if ok && inner%8 == 0 && inner >= pageSize {
			first, ok := c.word(data)
			if ok && first%8 == 0 && first >= pageSize && c.isVtable(inner) && c.isVtable(first) {
				return MultipleInheritance
			}
		}
	}
	return 0
}

// vtableMaxCheck is how many words a vtable candidate is checked over.
const vtableMaxCheck = 20

// isVtable reports whether p looks like a vtable address as memcheck
// judges it: it lies in a readable file mapping, and among its first words
// (up to 20, within the mapping) there are two non-null ones before any
// that does not point into an executable file mapping.
func (c *checker) isVtable(p uint64) bool {
	m, ok := findMapping(c.in.Maps, p)
	if !ok || !m.FileBacked() || !m.Readable() {
		return false
	}
	last := p + vtableMaxCheck*8
	if m.End >= 9 && last > m.End-9 {
		last = m.End - 9
	}
	fns := 0
	for a := p; a <= last; a += 8 {
		fn, ok := c.word(a)
		if !ok {
			return false
		}
		if fn == 0 {
			continue
		}
		fm, ok := findMapping(c.in.Maps, fn)
		if !ok || !fm.FileBacked() || !fm.Executable() {
			return false
		}
		fns++
		if fns == 2 {
			return true
		}
	}
	return false
}
