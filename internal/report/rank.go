package report

import (
	"cmp"
	"slices"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// rankedProcess is one process as a report shows it: its totals and its
// call sites split by category, each list sorted and cut to Top. Both
// renderers work from this so text and JSON always agree on what is shown.
type rankedProcess struct {
	aggregate.ProcessSnapshot
	heap, mapped []aggregate.SiteSnapshot
	// heapSites and mappedSites count the sites before the cut, so the text
	// report can say "top 10 of 250".
	heapSites, mappedSites int
}

// rank orders processes and their call sites by o.Sort. It never modifies
// s: the snapshot may be shared with other reports.
//
// Processes are ordered by their heap plus mmap figure for the key, largest
// first, so the biggest consumer of either kind leads (for SortRate: by
// their heap net rate); ties go by PID so the output is deterministic.
func rank(s aggregate.Snapshot, o Options) []rankedProcess {
	out := make([]rankedProcess, 0, len(s.Processes))
	for _, p := range s.Processes {
		rp := rankedProcess{ProcessSnapshot: p}
		for _, site := range p.Sites {
			if site.Category == aggregate.Mapped {
				rp.mapped = append(rp.mapped, site)
			} else {
				rp.heap = append(rp.heap, site)
			}
		}
		rp.heapSites, rp.mappedSites = len(rp.heap), len(rp.mapped)
		rp.heap = topSites(rp.heap, o)
		rp.mapped = topSites(rp.mapped, o)
		out = append(out, rp)
	}
	slices.SortStableFunc(out, func(a, b rankedProcess) int {
		if c := o.Sort.compareProcesses(a.ProcessSnapshot, b.ProcessSnapshot); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	return out
}

// topSites sorts sites (a slice rank owns) by the key, largest first, and
// keeps the first o.Top. Ties fall back to the other figures and finally to
// the address, so equal sites never swap places between reports.
func topSites(sites []aggregate.SiteSnapshot, o Options) []aggregate.SiteSnapshot {
	slices.SortFunc(sites, func(a, b aggregate.SiteSnapshot) int {
		return cmp.Or(
			o.Sort.compareSites(a, b),
			cmp.Compare(b.LiveBytes, a.LiveBytes),
			cmp.Compare(b.AllocBytes, a.AllocBytes),
			cmp.Compare(b.Allocs, a.Allocs),
			cmp.Compare(a.Address, b.Address),
		)
	})
	if o.Top > 0 && len(sites) > o.Top {
		sites = sites[:o.Top]
	}
	return sites
}

// runLostEvents is the run's lost-event total. The snapshot's own total
// should cover every process's, but a report must never understate losses,
// so the larger of the two wins.
func runLostEvents(s aggregate.Snapshot) uint64 {
	var sum uint64
	for _, p := range s.Processes {
		sum += p.LostEvents
	}
	return max(sum, s.LostEvents)
}
