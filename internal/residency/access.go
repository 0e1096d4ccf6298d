package residency

import (
	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/procfs"
)

// AccessRun reads the pages of r for access statistics: Present for a
// page with memory of its own (resident or swapped, not the zero page),
// and with softDirty Written for a page whose soft-dirty bit is set
// (written since the last clear_refs 4). Accessed is the page-table
// walk's to add.
func (m *Pagemap) AccessRun(r access.Range, softDirty bool) (access.Run, error) {
	ps := m.pageSize
	run := access.Run{Start: r.Start, Pages: make([]access.Page, (r.End-r.Start)/ps)}
	z := zeroFrames()
	for first := r.Start / ps; first < r.End/ps; {
		n := min(r.End/ps-first, pagemapChunk)
		buf, err := m.entries(first, n)
		if err != nil {
			return access.Run{}, err
		}
		for j := range n {
			e := procfs.Entry(buf, j)
			var p access.Page
			pfn := e.PFN()
			zero := pfn != 0 && (pfn == z.zero || (z.huge != 0 && pfn-z.huge < 512))
			if e.Swapped() || (e.Present() && !zero) {
				p |= access.Present
			}
			if softDirty && e.SoftDirty() && p&access.Present != 0 {
				p |= access.Written
			}
			run.Pages[first-r.Start/ps+j] = p
		}
		first += n
	}
	return run, nil
}
