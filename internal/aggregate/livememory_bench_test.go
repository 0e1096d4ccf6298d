package aggregate

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

// goMapBlock is the value a Go map would hold for a live block: the
// alternative to liveTable that BenchmarkLiveMemory compares against.
type goMapBlock struct {
	size uint64
	site uint32
	ms   uint32
}

// allocAddr is the address of the i-th of a run of blocks laid out as an
// allocator does: 16-byte aligned, sizes varying, each after the last.
func allocAddr(i uint64) uint64 {
	return 0x5555_0000_0000 + i*48 + (i%7)*16
}

// heapInUse is the live Go heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkLiveMemory measures the Go heap a Table needs per live heap
// block (table: the whole Table fed Alloc events, sites included), against
// a plain Go map holding the same per-block data (gomap).
func BenchmarkLiveMemory(b *testing.B) {
	for _, millions := range []int{1, 5, 10} {
		n := uint64(millions) * 1_000_000
		b.Run(fmt.Sprintf("%dM", millions), func(b *testing.B) {
			b.Run("table", func(b *testing.B) {
				var perBlock float64
				for b.Loop() {
					before := heapInUse()
					tb := NewTable()
					e := event.Event{Kind: event.Alloc, PID: 1}
					for i := range n {
						e.Addr, e.Size, e.CallSite, e.Time = allocAddr(i), 16+i%256, 0x40_0000+i%3000*0x40, i*50
						tb.Apply(&e)
					}
					perBlock = float64(heapInUse()-before) / float64(n)
					if got := tb.procs[1].live.len(); got != int(n) {
						b.Fatalf("%d live blocks, want %d", got, n)
					}
					runtime.KeepAlive(tb)
				}
				b.ReportMetric(perBlock, "B/live-block")
			})
			b.Run("gomap", func(b *testing.B) {
				var perBlock float64
				for b.Loop() {
					before := heapInUse()
					m := make(map[uint64]goMapBlock)
					for i := range n {
						m[allocAddr(i)] = goMapBlock{size: 16 + i%256, site: uint32(i % 3000), ms: uint32(i / 20000)}
					}
					perBlock = float64(heapInUse()-before) / float64(n)
					runtime.KeepAlive(m)
				}
				b.ReportMetric(perBlock, "B/live-block")
			})
		})
	}
}

// BenchmarkLiveChurn compares the speed of liveTable and a Go map under
// allocator-like churn: a million live blocks, each op frees the oldest
// and allocates a new one.
func BenchmarkLiveChurn(b *testing.B) {
	const live = 1 << 20
	// Addresses are drawn from a pool twice the live set, in a scrambled
	// order, so frees and allocs hit the table at random as in a real heap.
	addr := func(i uint64) uint64 { return allocAddr(splitmix(i) % (2 * live)) }
	b.Run("table", func(b *testing.B) {
		var lt liveTable
		for i := range uint64(live) {
			lt.insert(addr(i), liveBlock{size: i})
		}
		i := uint64(live)
		for b.Loop() {
			lt.remove(addr(i - live))
			lt.insert(addr(i), liveBlock{size: i})
			i++
		}
	})
	b.Run("gomap", func(b *testing.B) {
		m := make(map[uint64]goMapBlock)
		for i := range uint64(live) {
			m[addr(i)] = goMapBlock{size: i}
		}
		i := uint64(live)
		for b.Loop() {
			delete(m, addr(i-live))
			m[addr(i)] = goMapBlock{size: i}
			i++
		}
	})
}
