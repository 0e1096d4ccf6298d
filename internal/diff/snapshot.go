package diff

import (
	"strconv"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
)

// FromSnapshot is the side a snapshot gives (a recording replayed to its
// end): the figures ReadNDJSON would read from its final NDJSON report,
// taken from the data itself, every process and every call site.
func FromSnapshot(snap aggregate.Snapshot, sym report.Symbolizer) Side {
	side := newSide()
	for _, p := range snap.Processes {
		side.addProcess(p.Comm, Figures{LiveBytes: int64(p.Heap.LiveBytes), LiveAllocs: int64(p.Heap.LiveAllocs),
			Allocs: int64(p.Heap.Allocs), AllocBytes: int64(p.Heap.AllocBytes), Frees: int64(p.Heap.Frees),
			FreedBytes: int64(p.Heap.FreedBytes), PeakLiveBytes: int64(p.PeakLiveBytes)})
		for _, s := range p.Sites {
			side.addSite(p.Comm, siteNames(sym, p.PID, s), Figures{LiveBytes: int64(s.LiveBytes),
				LiveAllocs: int64(s.LiveAllocs), Allocs: int64(s.Allocs), AllocBytes: int64(s.AllocBytes),
				Frees: int64(s.Frees), FreedBytes: int64(s.FreedBytes)}) // a callsite record has no peak
		}
	}
	return side
}

// siteNames resolves a call site as a callsite record names it: empty
// where unresolved, the offset only within a known module.
func siteNames(sym report.Symbolizer, pid uint32, s aggregate.SiteSnapshot) siteFields {
	n := siteFields{Category: s.Category.String()}
	if sym == nil {
		return n
	}
	f := sym.Resolve(int(pid), s.Address)
	n.Function, n.File, n.Line, n.Module = f.Function, f.File, f.Line, f.Module
	if f.Module != "" {
		n.Offset = "0x" + strconv.FormatUint(f.Offset, 16)
	}
	return n
}
