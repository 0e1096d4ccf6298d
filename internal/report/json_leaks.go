package report

import "github.com/memtrace/memtrace/internal/aggregate"

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

// leakRecord is the leak check's part of process and callsite records
// (embedded: encoding/json writes its fields in place). Its fields are
// present only in runs that check.
type leakRecord struct {
	DefinitelyLostBytes  *uint64 `json:"definitely_lost_bytes,omitempty"`
	DefinitelyLostBlocks *uint64 `json:"definitely_lost_blocks,omitempty"`
	IndirectlyLostBytes  *uint64 `json:"indirectly_lost_bytes,omitempty"`
	IndirectlyLostBlocks *uint64 `json:"indirectly_lost_blocks,omitempty"`
	PossiblyLostBytes    *uint64 `json:"possibly_lost_bytes,omitempty"`
	PossiblyLostBlocks   *uint64 `json:"possibly_lost_blocks,omitempty"`
	ReachableBytes       *uint64 `json:"reachable_bytes,omitempty"`
	ReachableBlocks      *uint64 `json:"reachable_blocks,omitempty"`
	SuppressedBytes      *uint64 `json:"suppressed_bytes,omitempty"`
	SuppressedBlocks     *uint64 `json:"suppressed_blocks,omitempty"`
}

func (r *leakRecord) set(f LeakFigures) {
	r.DefinitelyLostBytes, r.DefinitelyLostBlocks = u64(f.DefinitelyLostBytes), u64(f.DefinitelyLostBlocks)
	r.IndirectlyLostBytes, r.IndirectlyLostBlocks = u64(f.IndirectlyLostBytes), u64(f.IndirectlyLostBlocks)
	r.PossiblyLostBytes, r.PossiblyLostBlocks = u64(f.PossiblyLostBytes), u64(f.PossiblyLostBlocks)
	r.ReachableBytes, r.ReachableBlocks = u64(f.ReachableBytes), u64(f.ReachableBlocks)
	r.SuppressedBytes, r.SuppressedBlocks = u64(f.SuppressedBytes), u64(f.SuppressedBlocks)
}

func fillProcessLeaks(r *processRecord, src LeakSource, pid uint32) {
	if src == nil {
		return
	}
	f, checked := src.ProcessLeaks(pid)
	r.LeakChecked = &checked
	r.set(f)
}

func fillSiteLeaks(r *callsiteRecord, src LeakSource, pid uint32, s aggregate.SiteSnapshot) {
	if src == nil {
		return
	}
	r.set(src.SiteLeaks(pid, s.Key()))
}
