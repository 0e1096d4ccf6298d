package symbolize

import (
	"debug/elf"
	"sort"
)

// segment is one PT_LOAD program header: the file bytes [off, off+filesz)
// are loaded at ELF virtual address vaddr.
type segment struct {
	off, filesz, vaddr uint64
}

// loadSegments keeps the PT_LOAD headers, sorted by file offset.
func loadSegments(f *elf.File) []segment {
	var segs []segment
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Filesz == 0 {
			continue
		}
		// A hostile header may wrap around; such a segment maps nothing.
		if p.Off+p.Filesz < p.Off || p.Vaddr+p.Filesz < p.Vaddr {
			continue
		}
		segs = append(segs, segment{off: p.Off, filesz: p.Filesz, vaddr: p.Vaddr})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].off < segs[j].off })
	return segs
}

// pageSize is the smallest mapping granule: the kernel maps a segment from
// its offset rounded down to a page, so a mapping may start a little before
// the segment's first byte.
const pageSize = 4096

// vaddrOf translates a file offset to the ELF virtual address it is loaded
// at. Translating through the program headers instead of assuming one bias
// per module works alike for PIE, non-PIE executables and shared libraries,
// and for linkers that put segments at offsets unlike their addresses.
func vaddrOf(segs []segment, off uint64) (uint64, bool) {
	// Exact containment first.
	i := sort.Search(len(segs), func(i int) bool { return segs[i].off > off }) - 1
	if i >= 0 {
		s := segs[i]
		if off-s.off < s.filesz {
			return s.vaddr + (off - s.off), true
		}
	}
	// Then the page-rounded head of the next segment, which the kernel maps
	// too though no section lives there.
	if j := i + 1; j < len(segs) {
		s := segs[j]
		if s.off-off < pageSize && s.vaddr >= s.off-off {
			return s.vaddr - (s.off - off), true
		}
	}
	return 0, false
}
