package leakcheck

import (
	"encoding/binary"
)

// PageFlags reads a process's page map: 8 bytes a page from page number
// first (procfs.Pagemap), and how many whole entries it read.
type PageFlags interface {
	ReadAt(buf []byte, first uint64) (int, error)
}

const (
	pagePresent = 1 << 63
	pageSwapped = 1 << 62
	// minTouchedLen: a shorter root is scanned whole, its page map not
	// read (one read of it costs about what a scan of 64 KiB does).
	minTouchedLen = 64 << 10
	// touchedChunk: page map entries read at once (32 KiB).
	touchedChunk = 4096
)

// Touched narrows roots to the pages that ever held data: present, or in
// swap. A page of a private mapping that is neither was never written
// (never read either, or it would map the zero page), so it holds no
// pointer: the rest of an 8 MiB thread stack, which a check at exit
// scans whole for every thread but the exiting one (node -e 0: 32 MiB of
// stacks, of 35 MiB scanned), reserved heap, an untouched .bss. Shared
// mappings stay whole: another process may have written their pages, and
// this one's page map does not show them. So do short roots, and pages
// whose entries cannot be read. untouched is the bytes left out.
func Touched(roots []Range, ms []Mapping, pm PageFlags) (out []Range, untouched uint64) {
	buf := make([]byte, touchedChunk*8)
	for _, r := range roots {
		m, ok := findMapping(ms, r.Start)
		if r.Len() < minTouchedLen || !ok || m.Shared() || r.End > m.End {
			out = append(out, r)
			continue
		}
		before, kept := len(out), uint64(0)
		first, last := r.Start/pageSize, (r.End-1)/pageSize
		for p := first; p <= last; {
			want := min(last-p+1, touchedChunk)
			n, _ := pm.ReadAt(buf[:want*8], p)
			for i := uint64(0); i < want; i++ {
				// An entry not read counts as touched: scanned.
				if i < uint64(max(n, 0)) {
					e := binary.LittleEndian.Uint64(buf[i*8:])
					if e&(pagePresent|pageSwapped) == 0 {
						continue
					}
				}
				page := p + i
				s, e := max(r.Start, page*pageSize), min(r.End, (page+1)*pageSize)
				kept += e - s
				if k := len(out) - 1; k >= before && out[k].End == s {
					out[k].End = e
				} else {
					out = append(out, Range{s, e})
				}
			}
			p += want
		}
		untouched += r.Len() - kept
	}
	return out, untouched
}
