package access

import (
	"math/rand/v2"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// BenchmarkEndSmallBlocks: folding one epoch of a million small blocks
// (48 bytes, 85 a page, in no order: as the live table hands them over),
// Ranges included: the part of an epoch's cost that grows with blocks.
func BenchmarkEndSmallBlocks(b *testing.B) {
	const n = 1_000_000
	blocks := make([]Block, n)
	for i := range blocks {
		blocks[i] = Block{Addr: 0x10000000 + uint64(i)*48, Size: 48, Site: aggregate.SiteKey{Address: uint64(i % 64), StackID: -1}}
	}
	rand.Shuffle(n, func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	tr := NewTracker(ps, DefaultColdAfter, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rs := Ranges(blocks, ps, 64)
		runs := &Runs{PageSize: ps}
		for _, r := range rs {
			pages := make([]Page, (r.End-r.Start)/ps)
			for j := range pages {
				pages[j] = Present | Accessed
			}
			runs.Runs = append(runs.Runs, Run{Start: r.Start, Pages: pages})
		}
		tr.End(uint64(i+1), blocks, runs, false, "bench")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/block")
}
