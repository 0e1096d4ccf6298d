package aggregate

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

const (
	page   = pageSize
	mapA   = 0x7f00_0000_0000
	mapB   = 0x7f00_1000_0000
	mapC   = 0x7f00_2000_0000
	msite  = 0x40_9000 // a site that calls mmap
	msite2 = 0x40_a000
)

func TestMapped(t *testing.T) {
	tests := []struct {
		name    string
		events  []event.Event
		mapped  Stats
		peak    uint64
		sites   map[siteKey]Stats // every site, exactly
		regions []region          // site is the call site here, not an index
	}{{
		name:    "mmap rounds to pages",
		events:  []event.Event{mmap(mapA, 5000, msite)},
		mapped:  Stats{Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page},
		peak:    2 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page}},
		regions: []region{{mapA, mapA + 2*page, msite}},
	}, {
		name:   "failed mmaps are ignored",
		events: []event.Event{mmap(0, page, msite), mmap(mapFailed, page, msite), mmap(mapA, 0, msite)},
	}, {
		name:   "munmap of the whole region",
		events: []event.Event{mmap(mapA, 2*page, msite), munmap(mapA, 2*page)},
		mapped: Stats{Allocs: 1, AllocBytes: 2 * page, Frees: 1, FreedBytes: 2 * page},
		peak:   2 * page,
		sites:  map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 2 * page, Frees: 1, FreedBytes: 2 * page}},
	}, {
		name:    "munmap rounds its length to pages",
		events:  []event.Event{mmap(mapA, 3*page, msite), munmap(mapA, page+1)},
		mapped:  Stats{Allocs: 1, AllocBytes: 3 * page, Frees: 1, FreedBytes: 2 * page, LiveAllocs: 1, LiveBytes: page},
		peak:    3 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 3 * page, Frees: 1, FreedBytes: 2 * page, LiveAllocs: 1, LiveBytes: page}},
		regions: []region{{mapA + 2*page, mapA + 3*page, msite}},
	}, {
		name:    "munmap in the middle splits the region",
		events:  []event.Event{mmap(mapA, 4*page, msite), munmap(mapA+page, page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 2, LiveBytes: 3 * page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 2, LiveBytes: 3 * page}},
		regions: []region{{mapA, mapA + page, msite}, {mapA + 2*page, mapA + 4*page, msite}},
	}, {
		name:    "munmap trims the tail",
		events:  []event.Event{mmap(mapA, 4*page, msite), munmap(mapA+3*page, 5*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 3 * page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 3 * page}},
		regions: []region{{mapA, mapA + 3*page, msite}},
	}, {
		name:    "munmap trims the head, ignoring the untracked part before",
		events:  []event.Event{mmap(mapA, 4*page, msite), munmap(mapA-2*page, 3*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 3 * page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 3 * page}},
		regions: []region{{mapA + page, mapA + 4*page, msite}},
	}, {
		name:    "munmap of an untracked range is ignored",
		events:  []event.Event{mmap(mapA, page, msite), munmap(mapB, 16*page), munmap(mapA+page, page)},
		mapped:  Stats{Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page},
		peak:    page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page}},
		regions: []region{{mapA, mapA + page, msite}},
	}, {
		name: "one munmap over two regions of a site is one free",
		events: []event.Event{
			mmap(mapA, page, msite), mmap(mapA+2*page, page, msite), mmap(mapA+4*page, page, msite),
			munmap(mapA, 4*page),
		},
		mapped:  Stats{Allocs: 3, AllocBytes: 3 * page, Frees: 1, FreedBytes: 2 * page, LiveAllocs: 1, LiveBytes: page},
		peak:    3 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 3, AllocBytes: 3 * page, Frees: 1, FreedBytes: 2 * page, LiveAllocs: 1, LiveBytes: page}},
		regions: []region{{mapA + 4*page, mapA + 5*page, msite}},
	}, {
		name: "one munmap over regions of two sites is a free for each",
		events: []event.Event{
			mmap(mapA, 2*page, msite), mmap(mapA+2*page, 2*page, msite2),
			munmap(mapA+page, 2*page),
		},
		mapped: Stats{Allocs: 2, AllocBytes: 4 * page, Frees: 2, FreedBytes: 2 * page, LiveAllocs: 2, LiveBytes: 2 * page},
		peak:   4 * page,
		sites: map[siteKey]Stats{
			{msite, Mapped}:  {Allocs: 1, AllocBytes: 2 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: page},
			{msite2, Mapped}: {Allocs: 1, AllocBytes: 2 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: page},
		},
		regions: []region{{mapA, mapA + page, msite}, {mapA + 3*page, mapA + 4*page, msite2}},
	}, {
		name:    "mmap inside tracked regions (MAP_FIXED) keeps them: a replacement, not a new region",
		events:  []event.Event{mmap(mapA, 2*page, msite), mmap(mapA+2*page, 2*page, msite2), mmap(mapA+page, 2*page, msite2)},
		mapped:  Stats{Allocs: 2, AllocBytes: 4 * page, LiveAllocs: 2, LiveBytes: 4 * page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page}, {msite2, Mapped}: {Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page}},
		regions: []region{{mapA, mapA + 2*page, msite}, {mapA + 2*page, mapA + 4*page, msite2}},
	}, {
		name:   "mmap over a tracked region and beyond (MAP_FIXED) replaces it",
		events: []event.Event{mmap(mapA, 4*page, msite), mmap(mapA+3*page, 2*page, msite2)},
		mapped: Stats{Allocs: 2, AllocBytes: 6 * page, Frees: 1, FreedBytes: page, LiveAllocs: 2, LiveBytes: 5 * page},
		peak:   5 * page,
		sites: map[siteKey]Stats{
			{msite, Mapped}:  {Allocs: 1, AllocBytes: 4 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 3 * page},
			{msite2, Mapped}: {Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page},
		},
		regions: []region{{mapA, mapA + 3*page, msite}, {mapA + 3*page, mapA + 5*page, msite2}},
	}, {
		name:    "mapped peak is exact",
		events:  []event.Event{mmap(mapA, 2*page, msite), mmap(mapB, 3*page, msite), munmap(mapA, 2*page), mmap(mapC, page, msite)},
		mapped:  Stats{Allocs: 3, AllocBytes: 6 * page, Frees: 1, FreedBytes: 2 * page, LiveAllocs: 2, LiveBytes: 4 * page},
		peak:    5 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 3, AllocBytes: 6 * page, Frees: 1, FreedBytes: 2 * page, LiveAllocs: 2, LiveBytes: 4 * page}},
		regions: []region{{mapB, mapB + 3*page, msite}, {mapC, mapC + page, msite}},
	}, {
		name:    "mremap grows in place",
		events:  []event.Event{mmap(mapA, page, msite), mremap(mapA, page, mapA, 3*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 3 * page, LiveAllocs: 1, LiveBytes: 3 * page},
		peak:    3 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 3 * page, LiveAllocs: 1, LiveBytes: 3 * page}},
		regions: []region{{mapA, mapA + 3*page, msite}},
	}, {
		name:    "mremap shrinks",
		events:  []event.Event{mmap(mapA, 4*page, msite), mremap(mapA, 4*page, mapA, page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 4 * page, FreedBytes: 3 * page, LiveAllocs: 1, LiveBytes: page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 4 * page, FreedBytes: 3 * page, LiveAllocs: 1, LiveBytes: page}},
		regions: []region{{mapA, mapA + page, msite}},
	}, {
		name:    "mremap moves; the old range is then untracked",
		events:  []event.Event{mmap(mapA, 2*page, msite), mremap(mapA, 2*page, mapB, 2*page), munmap(mapA, 2*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page},
		peak:    2 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 2 * page, LiveAllocs: 1, LiveBytes: 2 * page}},
		regions: []region{{mapB, mapB + 2*page, msite}},
	}, {
		name:    "mremap moves and grows",
		events:  []event.Event{mmap(mapA, 2*page, msite), mremap(mapA, 2*page, mapB, 5*page), munmap(mapB, page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 5 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 4 * page},
		peak:    5 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 5 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: 4 * page}},
		regions: []region{{mapB + page, mapB + 5*page, msite}},
	}, {
		name:    "mremap of part of a region leaves the rest",
		events:  []event.Event{mmap(mapA, 4*page, msite), mremap(mapA+page, 2*page, mapB, page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 4 * page, FreedBytes: page, LiveAllocs: 3, LiveBytes: 3 * page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 4 * page, FreedBytes: page, LiveAllocs: 3, LiveBytes: 3 * page}},
		regions: []region{{mapA, mapA + page, msite}, {mapA + 3*page, mapA + 4*page, msite}, {mapB, mapB + page, msite}},
	}, {
		name: "mremap of an old range only partly tracked moves the tracked part",
		// [mapA, mapA+2p) is tracked; the call names [mapA-p, mapA+2p).
		events:  []event.Event{mmap(mapA, 2*page, msite), mremap(mapA-page, 3*page, mapB, 4*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: 4 * page, LiveAllocs: 1, LiveBytes: 4 * page},
		peak:    4 * page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: 4 * page, LiveAllocs: 1, LiveBytes: 4 * page}},
		regions: []region{{mapB, mapB + 4*page, msite}},
	}, {
		name: "mremap over two sites' regions goes to the first; the other's bytes are freed",
		events: []event.Event{
			mmap(mapA, page, msite), mmap(mapA+page, 2*page, msite2),
			mremap(mapA, 3*page, mapB, 4*page),
		},
		mapped: Stats{Allocs: 2, AllocBytes: 3*page + 3*page, FreedBytes: 2 * page, LiveAllocs: 1, LiveBytes: 4 * page},
		peak:   4 * page,
		sites: map[siteKey]Stats{
			{msite, Mapped}:  {Allocs: 1, AllocBytes: 4 * page, LiveAllocs: 1, LiveBytes: 4 * page},
			{msite2, Mapped}: {Allocs: 1, AllocBytes: 2 * page, FreedBytes: 2 * page},
		},
		regions: []region{{mapB, mapB + 4*page, msite}},
	}, {
		name:    "mremap of an untracked range is ignored",
		events:  []event.Event{mmap(mapA, page, msite), mremap(mapB, page, mapC, 2*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page},
		peak:    page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page}},
		regions: []region{{mapA, mapA + page, msite}},
	}, {
		name:    "failed mremap is ignored",
		events:  []event.Event{mmap(mapA, page, msite), mremap(mapA, page, mapFailed, 2*page)},
		mapped:  Stats{Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page},
		peak:    page,
		sites:   map[siteKey]Stats{{msite, Mapped}: {Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page}},
		regions: []region{{mapA, mapA + page, msite}},
	}, {
		name:   "mremap onto a tracked region (MREMAP_FIXED) replaces it",
		events: []event.Event{mmap(mapA, page, msite), mmap(mapB, 2*page, msite2), mremap(mapA, page, mapB, page)},
		mapped: Stats{Allocs: 2, AllocBytes: 3 * page, Frees: 1, FreedBytes: page, LiveAllocs: 2, LiveBytes: 2 * page},
		peak:   3 * page,
		sites: map[siteKey]Stats{
			{msite, Mapped}:  {Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page},
			{msite2, Mapped}: {Allocs: 1, AllocBytes: 2 * page, Frees: 1, FreedBytes: page, LiveAllocs: 1, LiveBytes: page},
		},
		regions: []region{{mapB, mapB + page, msite}, {mapB + page, mapB + 2*page, msite2}},
	}, {
		name:   "heap and mapped are counted apart, even from one call site",
		events: []event.Event{alloc(blockA, 100, msite), mmap(mapA, page, msite)},
		mapped: Stats{Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page},
		peak:   page,
		sites: map[siteKey]Stats{
			{msite, Heap}:   {Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100},
			{msite, Mapped}: {Allocs: 1, AllocBytes: page, LiveAllocs: 1, LiveBytes: page},
		},
		regions: []region{{mapA, mapA + page, msite}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewTable()
			applyAll(tb, tc.events)
			ps := processOf(t, tb.Snapshot(), testPID)
			checkConsistent(t, ps)
			if ps.Mapped != tc.mapped {
				t.Errorf("mapped = %+v, want %+v", ps.Mapped, tc.mapped)
			}
			if ps.PeakMappedLiveBytes != tc.peak {
				t.Errorf("mapped peak = %d, want %d", ps.PeakMappedLiveBytes, tc.peak)
			}
			if got := sitesOf(ps); !maps.Equal(got, tc.sites) {
				t.Errorf("sites = %+v, want %+v", got, tc.sites)
			}
			if got := regionsOf(tb, testPID); !slices.Equal(got, tc.regions) {
				t.Errorf("regions = %x, want %x", got, tc.regions)
			}
		})
	}
}

// regionsOf lists pid's regions with call sites in place of site indexes.
func regionsOf(tb *Table, pid uint32) []region {
	p := tb.procs[pid]
	var out []region
	for _, r := range p.regions.rs {
		out = append(out, region{r.start, r.end, uint32(p.sites[r.site].addr)})
	}
	return out
}

// TestMappedAgainstPageModel replays random mmap/munmap/mremap calls
// against a page-by-page model of who owns what and checks that the live
// bytes per site and the region structure agree with it.
func TestMappedAgainstPageModel(t *testing.T) {
	const pages = 256
	sites := []uint64{0x1000, 0x2000, 0x3000}
	owner := make([]uint64, pages) // call site owning each page, 0 = untracked
	rng := rand.New(rand.NewPCG(1, 2))
	tb := NewTable()
	addr := func(pg int) uint64 { return mapA + uint64(pg)*page }
	for step := range 20000 {
		start := rng.IntN(pages)
		n := 1 + rng.IntN(min(16, pages-start))
		var e event.Event
		switch rng.IntN(3) {
		case 0:
			s := sites[rng.IntN(len(sites))]
			e = mmap(addr(start), uint64(n)*page-uint64(rng.IntN(page)), s)
			if !slices.Contains(owner[start:start+n], 0) {
				break // inside tracked mappings: a replacement keeps their owners
			}
			for k := start; k < start+n; k++ {
				owner[k] = s
			}
		case 1:
			e = munmap(addr(start), uint64(n)*page)
			for k := start; k < start+n; k++ {
				owner[k] = 0
			}
		case 2:
			to := rng.IntN(pages)
			m := 1 + rng.IntN(min(16, pages-to))
			e = mremap(addr(start), uint64(n)*page, addr(to), uint64(m)*page)
			var first uint64
			for k := start; k < start+n; k++ {
				if first == 0 {
					first = owner[k]
				}
				owner[k] = 0
			}
			if first == 0 {
				break // untracked: ignored, and the model has not changed
			}
			for k := to; k < to+m; k++ {
				owner[k] = first
			}
		}
		e.Time = uint64(step + 1)
		tb.Apply(&e)

		live := map[uint64]uint64{}
		for _, s := range owner {
			if s != 0 {
				live[s] += page
			}
		}
		ps := processOf(t, tb.Snapshot(), testPID)
		checkConsistent(t, ps)
		got := map[uint64]uint64{}
		for _, s := range ps.Sites {
			if s.LiveBytes != 0 {
				got[s.Address] = s.LiveBytes
			}
		}
		if !maps.Equal(got, live) {
			t.Fatalf("step %d (%v): live bytes by site = %v, model %v", step, e.Kind, got, live)
		}
		rs := tb.procs[testPID].regions.rs
		regions := map[uint32]uint64{}
		for i, r := range rs {
			if r.start >= r.end || (i > 0 && rs[i-1].end > r.start) {
				t.Fatalf("step %d: regions not sorted, disjoint and non-empty: %x", step, rs)
			}
			regions[r.site]++
		}
		for i, s := range tb.procs[testPID].sites {
			if s.stats.LiveAllocs != regions[uint32(i)] {
				t.Fatalf("step %d: site %#x LiveAllocs %d, regions %d", step, s.addr, s.stats.LiveAllocs, regions[uint32(i)])
			}
		}
	}
}
