package aggregate

import (
	"maps"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

const (
	blockA = 0x5555_0000_1000
	blockB = 0x5555_0000_2000
	blockC = 0x5555_0000_3000
	site1  = 0x40_1000
	site2  = 0x40_2000
)

type liveWant struct{ size, site uint64 }

func TestHeap(t *testing.T) {
	tests := []struct {
		name      string
		events    []event.Event
		heap      Stats
		peak      uint64
		unmatched uint64
		sites     map[siteKey]Stats // every site, exactly
		live      map[uint64]liveWant
	}{{
		name:   "alloc",
		events: []event.Event{alloc(blockA, 100, site1)},
		heap:   Stats{Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100},
		peak:   100,
		sites:  map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100}},
		live:   map[uint64]liveWant{blockA: {100, site1}},
	}, {
		name:   "failed alloc is not counted",
		events: []event.Event{alloc(0, 100, site1)},
	}, {
		name:   "free credits the allocating site, not its own",
		events: []event.Event{alloc(blockA, 100, site1), free(blockA)},
		heap:   Stats{Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100},
		peak:   100,
		sites:  map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100}},
	}, {
		name:      "free of unknown block is unmatched and changes nothing else",
		events:    []event.Event{alloc(blockA, 100, site1), free(blockB)},
		heap:      Stats{Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100},
		peak:      100,
		unmatched: 1,
		sites:     map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100}},
		live:      map[uint64]liveWant{blockA: {100, site1}},
	}, {
		name:      "double free: the second is unmatched",
		events:    []event.Event{alloc(blockA, 100, site1), free(blockA), free(blockA)},
		heap:      Stats{Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100},
		peak:      100,
		unmatched: 1,
		sites:     map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100}},
	}, {
		name:      "free with nothing live leaves live at zero",
		events:    []event.Event{free(blockA), free(blockB)},
		unmatched: 2,
	}, {
		name:   "free(NULL) releases nothing",
		events: []event.Event{alloc(blockA, 100, site1), free(0)},
		heap:   Stats{Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100},
		peak:   100,
		sites:  map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100}},
		live:   map[uint64]liveWant{blockA: {100, site1}},
	}, {
		name:   "alloc over a live block (lost free) releases the old one first",
		events: []event.Event{alloc(blockA, 100, site1), alloc(blockA, 50, site2)},
		heap:   Stats{Allocs: 2, AllocBytes: 150, Frees: 1, FreedBytes: 100, LiveAllocs: 1, LiveBytes: 50},
		peak:   100,
		sites: map[siteKey]Stats{
			{site1, Heap}: {Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100},
			{site2, Heap}: {Allocs: 1, AllocBytes: 50, LiveAllocs: 1, LiveBytes: 50},
		},
		live: map[uint64]liveWant{blockA: {50, site2}},
	}, {
		name:   "peak is exact",
		events: []event.Event{alloc(blockA, 100, site1), alloc(blockB, 200, site1), free(blockA), alloc(blockC, 50, site2)},
		heap:   Stats{Allocs: 3, AllocBytes: 350, Frees: 1, FreedBytes: 100, LiveAllocs: 2, LiveBytes: 250},
		peak:   300,
		sites: map[siteKey]Stats{
			{site1, Heap}: {Allocs: 2, AllocBytes: 300, Frees: 1, FreedBytes: 100, LiveAllocs: 1, LiveBytes: 200},
			{site2, Heap}: {Allocs: 1, AllocBytes: 50, LiveAllocs: 1, LiveBytes: 50},
		},
		live: map[uint64]liveWant{blockB: {200, site1}, blockC: {50, site2}},
	}, {
		name:   "realloc chain NULL->a->b->c",
		events: []event.Event{realloc(0, blockA, 10, site1), realloc(blockA, blockB, 20, site1), realloc(blockB, blockC, 30, site1)},
		heap:   Stats{Allocs: 3, AllocBytes: 60, Frees: 2, FreedBytes: 30, LiveAllocs: 1, LiveBytes: 30},
		peak:   30,
		sites:  map[siteKey]Stats{{site1, Heap}: {Allocs: 3, AllocBytes: 60, Frees: 2, FreedBytes: 30, LiveAllocs: 1, LiveBytes: 30}},
		live:   map[uint64]liveWant{blockC: {30, site1}},
	}, {
		name:   "realloc in place",
		events: []event.Event{alloc(blockA, 10, site1), realloc(blockA, blockA, 40, site2)},
		heap:   Stats{Allocs: 2, AllocBytes: 50, Frees: 1, FreedBytes: 10, LiveAllocs: 1, LiveBytes: 40},
		peak:   40,
		sites: map[siteKey]Stats{
			{site1, Heap}: {Allocs: 1, AllocBytes: 10, Frees: 1, FreedBytes: 10},
			{site2, Heap}: {Allocs: 1, AllocBytes: 40, LiveAllocs: 1, LiveBytes: 40},
		},
		live: map[uint64]liveWant{blockA: {40, site2}},
	}, {
		name:   "realloc credits the freed bytes to the block's own site",
		events: []event.Event{alloc(blockA, 10, site1), realloc(blockA, blockB, 20, site2)},
		heap:   Stats{Allocs: 2, AllocBytes: 30, Frees: 1, FreedBytes: 10, LiveAllocs: 1, LiveBytes: 20},
		peak:   20,
		sites: map[siteKey]Stats{
			{site1, Heap}: {Allocs: 1, AllocBytes: 10, Frees: 1, FreedBytes: 10},
			{site2, Heap}: {Allocs: 1, AllocBytes: 20, LiveAllocs: 1, LiveBytes: 20},
		},
		live: map[uint64]liveWant{blockB: {20, site2}},
	}, {
		name:   "realloc(p, 0) returning NULL frees p",
		events: []event.Event{alloc(blockA, 10, site1), realloc(blockA, 0, 0, site2)},
		heap:   Stats{Allocs: 1, AllocBytes: 10, Frees: 1, FreedBytes: 10},
		peak:   10,
		sites:  map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 10, Frees: 1, FreedBytes: 10}},
	}, {
		name:   "realloc(p, 0) returning a minimal block frees p and allocates 0 bytes",
		events: []event.Event{alloc(blockA, 10, site1), realloc(blockA, blockB, 0, site2)},
		heap:   Stats{Allocs: 2, AllocBytes: 10, Frees: 1, FreedBytes: 10, LiveAllocs: 1},
		peak:   10,
		sites: map[siteKey]Stats{
			{site1, Heap}: {Allocs: 1, AllocBytes: 10, Frees: 1, FreedBytes: 10},
			{site2, Heap}: {Allocs: 1, LiveAllocs: 1},
		},
		live: map[uint64]liveWant{blockB: {0, site2}},
	}, {
		name:   "failed realloc keeps p live",
		events: []event.Event{alloc(blockA, 10, site1), realloc(blockA, 0, 1<<40, site2)},
		heap:   Stats{Allocs: 1, AllocBytes: 10, LiveAllocs: 1, LiveBytes: 10},
		peak:   10,
		sites:  map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 10, LiveAllocs: 1, LiveBytes: 10}},
		live:   map[uint64]liveWant{blockA: {10, site1}},
	}, {
		name:   "failed realloc(NULL, n) changes nothing",
		events: []event.Event{realloc(0, 0, 10, site1), realloc(0, 0, 0, site1)},
	}, {
		name:      "realloc of an unknown block: unmatched free, then an alloc",
		events:    []event.Event{realloc(blockA, blockB, 20, site1)},
		heap:      Stats{Allocs: 1, AllocBytes: 20, LiveAllocs: 1, LiveBytes: 20},
		peak:      20,
		unmatched: 1,
		sites:     map[siteKey]Stats{{site1, Heap}: {Allocs: 1, AllocBytes: 20, LiveAllocs: 1, LiveBytes: 20}},
		live:      map[uint64]liveWant{blockB: {20, site1}},
	}, {
		name:      "realloc(unknown, 0) returning NULL is an unmatched free",
		events:    []event.Event{realloc(blockA, 0, 0, site1)},
		unmatched: 1,
	}, {
		name:   "blocks of 4 GiB and more",
		events: []event.Event{alloc(blockA, 5<<30, site1), alloc(blockB, 1<<32-1, site1), alloc(blockC, 1<<32, site2), free(blockC)},
		heap:   Stats{Allocs: 3, AllocBytes: 5<<30 + 1<<32 - 1 + 1<<32, Frees: 1, FreedBytes: 1 << 32, LiveAllocs: 2, LiveBytes: 5<<30 + 1<<32 - 1},
		peak:   5<<30 + 1<<32 - 1 + 1<<32,
		sites: map[siteKey]Stats{
			{site1, Heap}: {Allocs: 2, AllocBytes: 5<<30 + 1<<32 - 1, LiveAllocs: 2, LiveBytes: 5<<30 + 1<<32 - 1},
			{site2, Heap}: {Allocs: 1, AllocBytes: 1 << 32, Frees: 1, FreedBytes: 1 << 32},
		},
		live: map[uint64]liveWant{blockA: {5 << 30, site1}, blockB: {1<<32 - 1, site1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewTable()
			applyAll(tb, tc.events)
			ps := processOf(t, tb.Snapshot(), testPID)
			checkConsistent(t, ps)
			if ps.Heap != tc.heap {
				t.Errorf("heap = %+v, want %+v", ps.Heap, tc.heap)
			}
			if ps.PeakLiveBytes != tc.peak {
				t.Errorf("peak = %d, want %d", ps.PeakLiveBytes, tc.peak)
			}
			if ps.UnmatchedFrees != tc.unmatched {
				t.Errorf("unmatched frees = %d, want %d", ps.UnmatchedFrees, tc.unmatched)
			}
			if ps.Mapped != (Stats{}) || ps.PeakMappedLiveBytes != 0 {
				t.Errorf("mapped = %+v peak %d, want nothing", ps.Mapped, ps.PeakMappedLiveBytes)
			}
			if got := sitesOf(ps); !maps.Equal(got, tc.sites) {
				t.Errorf("sites = %+v, want %+v", got, tc.sites)
			}
			checkLive(t, tb, testPID, tc.live)
		})
	}
}

// checkLive asserts that pid's live heap blocks are exactly want, through
// both ForEachLive and LiveBlock.
func checkLive(t *testing.T, tb *Table, pid uint32, want map[uint64]liveWant) {
	t.Helper()
	got := map[uint64]liveWant{}
	tb.ForEachLive(pid, func(addr, size, site uint64) bool {
		got[addr] = liveWant{size, site}
		return true
	})
	if !maps.Equal(got, want) {
		t.Errorf("live blocks = %+v, want %+v", got, want)
	}
	for addr, w := range want {
		size, site, ok := tb.LiveBlock(pid, addr)
		if !ok || size != w.size || site != w.site {
			t.Errorf("LiveBlock(%#x) = %d, %#x, %v; want %d, %#x, true", addr, size, site, ok, w.size, w.site)
		}
	}
}

func TestMillionPairsLeaveNothingLive(t *testing.T) {
	const n = 1_000_000
	tb := NewTable()
	e := event.Event{PID: testPID}
	var want Stats
	for i := range uint64(n) {
		// Addresses recur as a real allocator's do; sizes and sites vary.
		addr := 0x5555_0000_0000 + (i%4096)*32
		size := 16 + i%1000
		e.Kind, e.Addr, e.Size, e.CallSite, e.Time = event.Alloc, addr, size, 0x400000+i%3000, i*100
		tb.Apply(&e)
		e.Kind, e.CallSite = event.Free, 0
		tb.Apply(&e)
		want.AllocBytes += size
	}
	want.Allocs, want.Frees, want.FreedBytes = n, n, want.AllocBytes
	ps := processOf(t, tb.Snapshot(), testPID)
	checkConsistent(t, ps)
	if ps.Heap != want {
		t.Errorf("heap = %+v, want %+v", ps.Heap, want)
	}
	if ps.PeakLiveBytes != 16+999 {
		t.Errorf("peak = %d, want %d", ps.PeakLiveBytes, 16+999)
	}
	if ps.UnmatchedFrees != 0 || len(ps.Sites) != 3000 {
		t.Errorf("unmatched = %d, sites = %d; want 0, 3000", ps.UnmatchedFrees, len(ps.Sites))
	}
	checkLive(t, tb, testPID, nil)
}
