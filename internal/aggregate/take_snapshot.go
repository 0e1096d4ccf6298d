package aggregate

import (
	"cmp"
	"slices"

	"github.com/memtrace/memtrace/internal/footprint"
)

// Snapshot returns a deep copy of the table's statistics: nothing in it is
// shared with the Table, so it can be handed to another goroutine.
// Processes are sorted by PID; each process's Sites are in no particular
// order.
func (t *Table) Snapshot() Snapshot {
	s := Snapshot{
		Time:        t.newest,
		LostEvents:  t.totalLost,
		Processes:   make([]ProcessSnapshot, 0, len(t.procs)),
		SampleBytes: t.sampleBytes,
		Marks:       t.Marks(),
	}
	for _, p := range t.procs {
		ps := p.snapshot()
		ps.Peak = p.peakSnapshot(t.peakTol)
		s.Processes = append(s.Processes, ps)
	}
	t.fillRates(s.Processes)
	slices.SortFunc(s.Processes, func(a, b ProcessSnapshot) int {
		return cmp.Compare(a.PID, b.PID)
	})
	return s
}

func (p *process) snapshot() ProcessSnapshot {
	ps := ProcessSnapshot{
		PID:                 p.pid,
		Comm:                p.comm,
		Exited:              p.exited,
		ExitTime:            p.exitTime,
		Heap:                p.heap,
		PeakLiveBytes:       p.peakHeap,
		UnmatchedFrees:      p.unmatchedFrees,
		LostEvents:          p.lost,
		Mapped:              p.mapped,
		PeakMappedLiveBytes: p.peakMapped,
		Sites:               make([]SiteSnapshot, len(p.sites)),
	}
	for i, st := range p.sites {
		ps.Sites[i] = SiteSnapshot{Address: st.addr, Leaf: st.leaf, StackID: st.stack, Category: st.cat, Stats: st.stats,
			JVMCategory: p.jvmName(st.jvm), BeforeTable: st.noTable}
	}
	ps.Resident = p.resident.snapshot() // resident.go
	ps.Regions = make([]footprint.Range, len(p.regions.rs))
	ps.RegionSites = make([]int, len(p.regions.rs))
	for i, r := range p.regions.rs {
		ps.Regions[i] = footprint.Range{Start: r.start, End: r.end}
		ps.RegionSites[i] = int(r.site)
	}
	p.est.fill(&ps)                           // sampled mode: standard errors, exact counts (estimate.go)
	ps.JVM = jvmSummary(p.jvmNames, ps.Sites) // jvm.go
	p.parts.fill(&ps, p.est)
	return ps
}
