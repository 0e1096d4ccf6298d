package aggregate

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

const (
	blockD = 0x5555_0000_4000
	blockE = 0x5555_0000_5000
	blockF = 0x5555_0000_6000
)

func withStack(stack int32, e event.Event) event.Event {
	e.StackID = stack
	return e
}

// TestStackBreakdown: with the breakdown, one site per call site (the
// rows of a run without stacks), and each heap site's figures by stack;
// without it, a site per (call site, stack) as --detail has them.
func TestStackBreakdown(t *testing.T) {
	evs := []event.Event{
		withStack(1, alloc(blockA, 100, site1)),
		withStack(2, alloc(blockB, 200, site1)),
		withStack(1, alloc(blockC, 300, site1)),
		withStack(-1, alloc(blockD, 7, site1)), // no stack taken
		withStack(3, alloc(blockE, 50, site2)),
		free(blockA),
		withStack(2, realloc(blockC, blockF, 1000, site1)), // moves stack 1's block to stack 2
		withStack(4, mmap(0x7000_0000, 8192, site2)),
	}
	tb := NewTable()
	tb.SetStackBreakdown(true)
	applyAll(tb, evs)
	p := processOf(t, tb.Snapshot(), testPID)
	checkConsistent(t, p)
	want := map[siteKey]Stats{
		{site1, Heap}:   {Allocs: 5, AllocBytes: 1607, Frees: 2, FreedBytes: 400, LiveAllocs: 3, LiveBytes: 1207},
		{site2, Heap}:   {Allocs: 1, AllocBytes: 50, LiveAllocs: 1, LiveBytes: 50},
		{site2, Mapped}: {Allocs: 1, AllocBytes: 8192, LiveAllocs: 1, LiveBytes: 8192},
	}
	if got := sitesOf(p); len(got) != len(p.Sites) || !maps.Equal(got, want) {
		t.Errorf("sites %+v, want %+v", p.Sites, want)
	}
	wantStacks := map[siteKey][]StackShare{
		{site1, Heap}: {
			{StackID: 2, Stats: Stats{Allocs: 2, AllocBytes: 1200, LiveAllocs: 2, LiveBytes: 1200}},
			{StackID: -1, Stats: Stats{Allocs: 1, AllocBytes: 7, LiveAllocs: 1, LiveBytes: 7}},
			{StackID: 1, Stats: Stats{Allocs: 2, AllocBytes: 400, Frees: 2, FreedBytes: 400}},
		},
		{site2, Heap}:   {{StackID: 3, Stats: Stats{Allocs: 1, AllocBytes: 50, LiveAllocs: 1, LiveBytes: 50}}},
		{site2, Mapped}: nil,
	}
	for _, s := range p.Sites {
		if s.StackID != -1 {
			t.Errorf("site %#x %v: StackID %d, want -1", s.Address, s.Category, s.StackID)
		}
		w := wantStacks[siteKey{s.Address, s.Category}]
		if !slices.Equal(s.Stacks, w) {
			t.Errorf("site %#x %v: stacks %+v, want %+v", s.Address, s.Category, s.Stacks, w)
		}
		parts := s.ByStack()
		if len(w) > 0 && (len(parts) != len(w) || parts[0].StackID != w[0].StackID || parts[0].Stats != w[0].Stats || parts[0].Address != s.Address) {
			t.Errorf("site %#x: ByStack %+v", s.Address, parts)
		}
	}

	// Without the breakdown the stack is part of the site.
	tb = NewTable()
	applyAll(tb, evs)
	p = processOf(t, tb.Snapshot(), testPID)
	n := 0
	for _, s := range p.Sites {
		if s.Stacks != nil {
			t.Errorf("site %#x: stacks without the breakdown", s.Address)
		}
		if s.Address == site1 {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d sites of call site 1 without the breakdown, want 3 (stacks 1, 2, none)", n)
	}
}

// TestStackBreakdownSampled: in sampled mode each stack's share is its
// samples' estimate, and the shares' rounded figures add up exactly to
// the site's, whatever the weights' fractions.
func TestStackBreakdownSampled(t *testing.T) {
	const n = 1000
	tb := NewTable()
	tb.SetSampleBytes(n)
	tb.SetStackBreakdown(true)
	rng := rand.New(rand.NewPCG(3, 4))
	var evs []event.Event
	live := map[uint64]bool{}
	for i := range 3000 {
		addr := uint64(0x10000 + 64*(i%500))
		if live[addr] {
			evs = append(evs, free(addr))
			delete(live, addr)
			continue
		}
		size := uint64(1 + rng.IntN(3000))
		evs = append(evs, withStack(int32(rng.IntN(7))-1, alloc(addr, size, site1+uint64(rng.IntN(2)))))
		live[addr] = true
	}
	applyAll(tb, evs)
	p := processOf(t, tb.Snapshot(), testPID)
	for _, s := range p.Sites {
		var sum Stats
		for _, sh := range s.Stacks {
			sum.Allocs += sh.Allocs
			sum.AllocBytes += sh.AllocBytes
			sum.Frees += sh.Frees
			sum.FreedBytes += sh.FreedBytes
			sum.LiveAllocs += sh.LiveAllocs
			sum.LiveBytes += sh.LiveBytes
		}
		if sum != s.Stats || len(s.Stacks) != 7 {
			t.Errorf("site %#x: %d stacks summing to %+v, want 7 summing to %+v", s.Address, len(s.Stacks), sum, s.Stats)
		}
	}

	// One stack's share by hand: two blocks, one freed.
	tb = NewTable()
	tb.SetSampleBytes(n)
	tb.SetStackBreakdown(true)
	applyAll(tb, []event.Event{withStack(5, alloc(blockA, 1000, site1)), withStack(5, alloc(blockB, 3000, site1)), free(blockA)})
	w1, w3 := 1/(1-math.Exp(-1)), 1/(1-math.Exp(-3))
	sh := processOf(t, tb.Snapshot(), testPID).Sites[0].Stacks
	want := StackShare{StackID: 5, Stats: Stats{Allocs: uint64(math.Round(w1 + w3)), AllocBytes: uint64(math.Round(1000*w1 + 3000*w3)),
		Frees: uint64(math.Round(w1)), FreedBytes: uint64(math.Round(1000 * w1)), LiveAllocs: uint64(math.Round(w3)), LiveBytes: uint64(math.Round(3000 * w3))}}
	if len(sh) != 1 || sh[0] != want {
		t.Errorf("stacks %+v, want [%+v]", sh, want)
	}
}
