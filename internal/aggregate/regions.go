package aggregate

import (
	"slices"
	"sort"
)

// pageSize is what mmap, munmap and mremap round lengths up to.
const pageSize = 4096

// mapFailed is MAP_FAILED, (void *)-1: what a failed mmap or mremap returns.
const mapFailed = ^uint64(0)

// region is a tracked anonymous mapping [start, end), or what is left of
// one after partial unmaps.
type region struct {
	start, end uint64
	site       uint32 // index into the owning process's sites
}

// regionSet holds a process's tracked regions sorted by start, never
// overlapping and never empty, so a range's overlaps are found by binary
// search. Regions are few (mmap calls outside the allocator), so a sorted
// slice beats any tree.
type regionSet struct {
	rs []region
}

// overlapping returns the bounds of the regions overlapping [start, end):
// rs[i:j]; i == j when there are none.
func (s *regionSet) overlapping(start, end uint64) (i, j int) {
	// Regions do not overlap, so ends are sorted too.
	i = sort.Search(len(s.rs), func(k int) bool { return s.rs[k].end > start })
	j = i + sort.Search(len(s.rs)-i, func(k int) bool { return s.rs[i+k].start >= end })
	return i, j
}

// covers reports whether tracked regions cover [start, end) whole.
func (s *regionSet) covers(start, end uint64) bool {
	i, j := s.overlapping(start, end)
	at := start
	for _, r := range s.rs[i:j] {
		if r.start > at {
			return false
		}
		at = r.end
	}
	return i < j && at >= end
}

// replace puts with in place of rs[i:j]; with must keep the order.
func (s *regionSet) replace(i, j int, with ...region) {
	s.rs = slices.Replace(s.rs, i, j, with...)
}

// insert adds r, which must not overlap any region.
func (s *regionSet) insert(r region) {
	i, _ := s.overlapping(r.start, r.end)
	s.rs = slices.Insert(s.rs, i, r)
}

// pageRound rounds a length up to whole pages, saturating.
func pageRound(n uint64) uint64 {
	if n > mapFailed-(pageSize-1) {
		return mapFailed &^ (pageSize - 1)
	}
	return (n + pageSize - 1) &^ (pageSize - 1)
}

// rangeEnd is the end of [addr, addr+pageRound(size)), saturating so a bogus
// size cannot wrap around the address space.
func rangeEnd(addr, size uint64) uint64 {
	n := pageRound(size)
	if addr > mapFailed-n {
		return mapFailed
	}
	return addr + n
}
