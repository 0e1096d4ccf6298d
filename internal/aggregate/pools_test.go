package aggregate

import (
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

// pool is a pymalloc pool opened (event.FuncPyPool) at addr, 16 KiB.
func pool(addr, site uint64) event.Event {
	return event.Event{Kind: event.Alloc, Func: event.FuncPyPool, PID: testPID, Addr: addr, Size: 16 << 10, CallSite: site}
}

// TestPools: pymalloc's pools (an interpreter that inlines pymalloc)
// are never freed one by one: a pool opened again at its address was
// emptied, and its old opener's bytes go back; an unmapped arena frees
// the pools it held, and nothing else of the heap.
func TestPools(t *testing.T) {
	const arena = 0x7f0000000000
	tests := []struct {
		name string
		evs  []event.Event
		want map[uint64]uint64 // site -> live bytes
	}{
		{"opened", []event.Event{pool(arena, 0xa), pool(arena+16<<10, 0xb)},
			map[uint64]uint64{0xa: 16 << 10, 0xb: 16 << 10}},
		{"opened again by another line", []event.Event{pool(arena, 0xa), pool(arena, 0xb)},
			map[uint64]uint64{0xa: 0, 0xb: 16 << 10}},
		{"arena unmapped", []event.Event{pool(arena, 0xa), pool(arena+(1<<20)-16<<10, 0xb), pool(arena+1<<20, 0xc),
			alloc(arena+1<<19, 64, 0xd), munmap(arena, 1<<20)},
			map[uint64]uint64{0xa: 0, 0xb: 0, 0xc: 16 << 10, 0xd: 64}},
		{"no pools: munmap frees no block", []event.Event{alloc(arena, 16<<10, 0xd), munmap(arena, 1<<20)},
			map[uint64]uint64{0xd: 16 << 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			applyAll(tb, tt.evs)
			ps := processOf(t, tb.Snapshot(), testPID)
			checkConsistent(t, ps)
			got := map[uint64]uint64{}
			for k, s := range sitesOf(ps) {
				if k.cat == Heap {
					got[k.addr] = s.LiveBytes
				}
			}
			for site, want := range tt.want {
				if got[site] != want {
					t.Errorf("site %#x: %d live bytes, want %d (all: %v)", site, got[site], want, got)
				}
			}
		})
	}
}
