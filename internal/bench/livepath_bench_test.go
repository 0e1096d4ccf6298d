package bench

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
)

// goHeap is the live Go heap after full collections, the bytes ever
// allocated and the number of allocations.
func goHeap() (live, total, mallocs uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.TotalAlloc, ms.Mallocs
}

// BenchmarkLivePath measures memtrace's memory per live block over the
// whole path an event takes in user space: a ring record decoded, handed
// to the loop as an Input (as session.feedEvent does) and applied to the
// table, peak tracking included. Blocks of 48 bytes, as a program holding
// millions of them allocates them (testdata/bench/hold.c), from 64 call
// sites. B/live-block is the Go heap the table keeps per block, after
// collections; garbage-B/event what each event allocated that did not
// stay (the table's old shards as it grows, mostly: the collector's
// work, and the heap's headroom), allocs/event how many allocations it
// made (per-event garbage would show as 1 or more).
func BenchmarkLivePath(b *testing.B) {
	for _, millions := range []int{1, 5} {
		n := uint64(millions) * 1_000_000
		b.Run(fmt.Sprintf("%dM", millions), func(b *testing.B) {
			var perBlock, garbage, allocs float64
			for b.Loop() {
				before, allocBefore, mallocsBefore := goHeap()
				t := aggregate.NewTable()
				loop := &pipeline.Loop{Table: t, Printer: &pipeline.Printer{Table: t}}
				rec := make([]byte, recordSize)
				in := pipeline.Input{Kind: pipeline.InEvent, Event: &event.Event{}}
				for i := range n {
					encodeRecord(rec, event.Event{Time: 1000 + i*100, Kind: event.Alloc, Func: event.FuncMalloc,
						Addr: 0x5555_0000_0000 + i*64, Size: 48, CallSite: 0x40_1000 + i%64*0x10, PID: 7, TID: 7})
					decodeRecord(rec, in.Event)
					if err := loop.Feed(&in); err != nil {
						b.Fatal(err)
					}
				}
				after, allocAfter, mallocsAfter := goHeap()
				kept := after - before
				perBlock = float64(kept) / float64(n)
				garbage = float64(allocAfter-allocBefore-kept) / float64(n)
				allocs = float64(mallocsAfter-mallocsBefore) / float64(n)
				if got := t.LiveCount(7); got != int(n) {
					b.Fatalf("%d live blocks, want %d", got, n)
				}
				runtime.KeepAlive(t)
			}
			b.ReportMetric(perBlock, "B/live-block")
			b.ReportMetric(garbage, "garbage-B/event")
			b.ReportMetric(allocs, "allocs/event")
		})
	}
}
