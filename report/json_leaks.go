package report

import "github.com/memtrace/memtrace/aggregate"

// LeakFigures are the leak check's bytes and blocks of each class, as
// valgrind's LEAK SUMMARY counts them, plus those suppressed.
type LeakFigures struct {
	DefinitelyLostBytes, DefinitelyLostBlocks uint64
	IndirectlyLostBytes, IndirectlyLostBlocks uint64
	PossiblyLostBytes, PossiblyLostBlocks     uint64
	ReachableBytes, ReachableBlocks           uint64
	SuppressedBytes, SuppressedBlocks         uint64
}

// LeakSource gives the figures of the leak check of a process (at its exit,
// or when the run ended) and of each of its call sites.
type LeakSource interface {
	// ProcessLeaks returns pid's figures; checked is false until its check
	// has run.
	ProcessLeaks(pid uint32) (f LeakFigures, checked bool)
	// SiteLeaks returns the figures of the blocks allocated at site.
	SiteLeaks(pid uint32, site aggregate.SiteKey) LeakFigures
}

func u64(v uint64) *uint64 { return &v }

func fillProcessLeaks(r *processRecord, src LeakSource, pid uint32) {
	if src == nil {
		return
	}
	f, checked := src.ProcessLeaks(pid)
	r.LeakChecked = &checked
	r.DefinitelyLostBytes, r.DefinitelyLostBlocks = u64(f.DefinitelyLostBytes), u64(f.DefinitelyLostBlocks)
	r.IndirectlyLostBytes, r.IndirectlyLostBlocks = u64(f.IndirectlyLostBytes), u64(f.IndirectlyLostBlocks)
	r.PossiblyLostBytes, r.PossiblyLostBlocks = u64(f.PossiblyLostBytes), u64(f.PossiblyLostBlocks)
	r.ReachableBytes, r.ReachableBlocks = u64(f.ReachableBytes), u64(f.ReachableBlocks)
	r.SuppressedBytes, r.SuppressedBlocks = u64(f.SuppressedBytes), u64(f.SuppressedBlocks)
}

func fillSiteLeaks(r *callsiteRecord, src LeakSource, pid uint32, s aggregate.SiteSnapshot) {
	if src == nil {
		return
	}
	f := src.SiteLeaks(pid, s.Key())
	r.DefinitelyLostBytes, r.DefinitelyLostBlocks = u64(f.DefinitelyLostBytes), u64(f.DefinitelyLostBlocks)
	r.IndirectlyLostBytes, r.IndirectlyLostBlocks = u64(f.IndirectlyLostBytes), u64(f.IndirectlyLostBlocks)
	r.PossiblyLostBytes, r.PossiblyLostBlocks = u64(f.PossiblyLostBytes), u64(f.PossiblyLostBlocks)
	r.ReachableBytes, r.ReachableBlocks = u64(f.ReachableBytes), u64(f.ReachableBlocks)
	r.SuppressedBytes, r.SuppressedBlocks = u64(f.SuppressedBytes), u64(f.SuppressedBlocks)
}
