package report

import (
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// siteAddrs lists the addresses of sites, for comparing orders.
func siteAddrs(sites []aggregate.SiteSnapshot) []uint64 {
	var out []uint64
	for _, s := range sites {
		out = append(out, s.Address)
	}
	return out
}

func TestRankSitesBySortKey(t *testing.T) {
	// Each site leads under exactly one key; 0x50 ties 0x40 on everything
	// and must follow it by address.
	proc := aggregate.ProcessSnapshot{PID: 1, Sites: []aggregate.SiteSnapshot{
		{Address: 0x10, Stats: aggregate.Stats{LiveBytes: 900, AllocBytes: 1000, Allocs: 5}},
		{Address: 0x20, Stats: aggregate.Stats{LiveBytes: 10, AllocBytes: 5000, Allocs: 2}},
		{Address: 0x30, Stats: aggregate.Stats{LiveBytes: 0, AllocBytes: 100, Allocs: 700}},
		{Address: 0x50, Stats: aggregate.Stats{LiveBytes: 1, AllocBytes: 1, Allocs: 1}},
		{Address: 0x40, Stats: aggregate.Stats{LiveBytes: 1, AllocBytes: 1, Allocs: 1}},
		{Address: 0x99, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: 1 << 30}},
	}}
	tests := []struct {
		sort SortKey
		top  int
		heap []uint64
	}{
		{SortLive, 0, []uint64{0x10, 0x20, 0x40, 0x50, 0x30}},
		{SortAllocated, 0, []uint64{0x20, 0x10, 0x30, 0x40, 0x50}},
		{SortAllocs, 0, []uint64{0x30, 0x10, 0x20, 0x40, 0x50}},
		{SortLive, 2, []uint64{0x10, 0x20}},
		{SortAllocs, 1, []uint64{0x30}},
		{SortLive, 10, []uint64{0x10, 0x20, 0x40, 0x50, 0x30}},
	}
	for _, tt := range tests {
		got := rank(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{proc}}, Options{Sort: tt.sort, Top: tt.top})
		if len(got) != 1 {
			t.Fatalf("rank returned %d processes, want 1", len(got))
		}
		p := got[0]
		if h := siteAddrs(p.heap); !slices.Equal(h, tt.heap) {
			t.Errorf("sort %s top %d: heap sites %#x, want %#x", tt.sort, tt.top, h, tt.heap)
		}
		if m := siteAddrs(p.mapped); !slices.Equal(m, []uint64{0x99}) {
			t.Errorf("sort %s top %d: mmap sites %#x, want [0x99]", tt.sort, tt.top, m)
		}
		if p.heapSites != 5 || p.mappedSites != 1 {
			t.Errorf("sort %s top %d: counted %d heap, %d mmap sites, want 5, 1", tt.sort, tt.top, p.heapSites, p.mappedSites)
		}
	}
}

func TestRankTopAppliesPerCategory(t *testing.T) {
	proc := aggregate.ProcessSnapshot{PID: 1}
	for i := range uint64(4) {
		proc.Sites = append(proc.Sites,
			aggregate.SiteSnapshot{Address: 0x100 + i, Category: aggregate.Heap, Stats: aggregate.Stats{LiveBytes: i}},
			aggregate.SiteSnapshot{Address: 0x200 + i, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: i}})
	}
	p := rank(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{proc}}, Options{Sort: SortLive, Top: 2})[0]
	if h := siteAddrs(p.heap); !slices.Equal(h, []uint64{0x103, 0x102}) {
		t.Errorf("heap sites %#x, want [0x103 0x102]", h)
	}
	if m := siteAddrs(p.mapped); !slices.Equal(m, []uint64{0x203, 0x202}) {
		t.Errorf("mmap sites %#x, want [0x203 0x202]", m)
	}
}

func TestRankProcesses(t *testing.T) {
	s := aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{
		{PID: 30, Heap: aggregate.Stats{LiveBytes: 10, Allocs: 100}},
		// Mapped bytes count toward a process's rank: a Go program's heap
		// is all mmap.
		{PID: 20, Mapped: aggregate.Stats{LiveBytes: 50}},
		{PID: 10, Heap: aggregate.Stats{LiveBytes: 10, Allocs: 1}},
	}}
	tests := []struct {
		sort SortKey
		want []uint32
	}{
		{SortLive, []uint32{20, 10, 30}},
		{SortAllocs, []uint32{30, 10, 20}},
	}
	for _, tt := range tests {
		var got []uint32
		for _, p := range rank(s, Options{Sort: tt.sort}) {
			got = append(got, p.PID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("sort %s: process order %v, want %v", tt.sort, got, tt.want)
		}
	}
}

func TestRankLeavesSnapshotAlone(t *testing.T) {
	s := periodicSnapshot()
	before := siteAddrs(s.Processes[1].Sites)
	rank(s, Options{Sort: SortLive, Top: 1})
	if after := siteAddrs(s.Processes[1].Sites); !slices.Equal(before, after) {
		t.Errorf("rank reordered the snapshot's sites: %#x, was %#x", after, before)
	}
	if s.Processes[0].PID != 4242 {
		t.Errorf("rank reordered the snapshot's processes")
	}
}

func TestRunLostEvents(t *testing.T) {
	tests := []struct {
		name string
		s    aggregate.Snapshot
		want uint64
	}{
		{"none", aggregate.Snapshot{}, 0},
		{"run total", aggregate.Snapshot{LostEvents: 7, Processes: []aggregate.ProcessSnapshot{{LostEvents: 2}}}, 7},
		{"per-process sum is larger", aggregate.Snapshot{LostEvents: 1, Processes: []aggregate.ProcessSnapshot{{LostEvents: 2}, {LostEvents: 3}}}, 5},
	}
	for _, tt := range tests {
		if got := runLostEvents(tt.s); got != tt.want {
			t.Errorf("%s: runLostEvents = %d, want %d", tt.name, got, tt.want)
		}
	}
}
