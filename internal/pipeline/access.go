package pipeline

import (
	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/recording"
)

// AccessBlocks are pid's live heap blocks and mapped regions in t: what
// an access epoch's figures are folded over.
func AccessBlocks(t *aggregate.Table, pid uint32) []access.Block {
	var blocks []access.Block
	t.ForEachLiveSite(pid, func(addr, size uint64, site aggregate.SiteKey) bool {
		blocks = append(blocks, access.Block{Addr: addr, Size: size, Site: site, Category: aggregate.Heap})
		return true
	})
	t.ForEachMappedSite(pid, func(start, end uint64, site aggregate.SiteKey) {
		blocks = append(blocks, access.Block{Addr: start, Size: end - start, Site: site, Category: aggregate.Mapped})
	})
	return blocks
}

// AccessFolder folds a replay's access records into epochs, per process,
// with the live blocks its Table holds at each record: the live run
// folded the same readings with the same blocks (docs/recording.md).
type AccessFolder struct {
	trackers map[uint32]*access.Tracker
	// OnStart, when set, gets each new tracker (--html greys cold runs).
	OnStart func(pid uint32, t *access.Tracker)
}

// Fold takes one record: a start makes pid's tracker afresh and returns
// false; an epoch's end returns the epoch (false when pid's tracking
// never started).
func (f *AccessFolder) Fold(t *aggregate.Table, a *recording.Access) (access.Epoch, bool) {
	if f.trackers == nil {
		f.trackers = map[uint32]*access.Tracker{}
	}
	if a.Start {
		tr := access.NewTracker(a.PageSize, a.ColdAfter, a.Time)
		f.trackers[a.PID] = tr
		if f.OnStart != nil {
			f.OnStart(a.PID, tr)
		}
		return access.Epoch{}, false
	}
	tr := f.trackers[a.PID]
	if tr == nil {
		return access.Epoch{}, false
	}
	return tr.End(a.Time, AccessBlocks(t, a.PID), &a.Pages, a.WrittenKnown, a.Method), true
}
