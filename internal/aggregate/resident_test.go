package aggregate

import (
	"cmp"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

func TestResident(t *testing.T) {
	const mean = 16384
	p := FaultProbability(4096, mean) // 1 - e^-0.25
	w := 4096 / p                     // bytes a sampled page stands for
	se := func(pages float64) float64 { return math.Sqrt(pages*4096*4096*(1-p)) / p }
	fault := func(addr, site uint64) event.Event {
		return event.Event{Kind: event.Fault, PID: 1, Addr: addr, Size: 4096, OldSize: mean, CallSite: site, StackID: -1}
	}
	// A fault that mapped a 2 MiB huge page: sampled with its own chance,
	// weighed by its size over it.
	ph := FaultProbability(2<<20, mean)
	huge := event.Event{Kind: event.Fault, PID: 1, Addr: 0x200000, Size: 2 << 20, OldSize: mean, CallSite: 0xa, StackID: -1}
	wh, vh := (2<<20)/ph, float64(2<<20)*(2<<20)*(1-ph)/(ph*ph)
	gone := func(addr uint64) event.Event {
		return event.Event{Kind: event.Unresident, PID: 1, Addr: addr, StackID: -1}
	}
	tests := []struct {
		name   string
		events []event.Event
		want   *ResidentSnapshot
	}{
		{"none", nil, nil},
		{"two sites", []event.Event{fault(0x1000, 0xa), fault(0x2000, 0xa), fault(0x9000, 0xb)},
			&ResidentSnapshot{SampleBytes: mean, Pages: 3, Bytes: uint64(math.Round(3 * w)), Stderr: se(3), Sites: []ResidentSite{
				{Address: 0xa, StackID: -1, Pages: 2, Bytes: uint64(math.Round(2 * w)), Stderr: se(2)},
				{Address: 0xb, StackID: -1, Pages: 1, Bytes: uint64(math.Round(w)), Stderr: se(1)},
			}}},
		// A page sampled again (freed, then faulted by another site) is charged once, to the last.
		{"refault", []event.Event{fault(0x1000, 0xa), fault(0x1000, 0xb)},
			&ResidentSnapshot{SampleBytes: mean, Pages: 1, Bytes: uint64(math.Round(w)), Stderr: se(1), Sites: []ResidentSite{
				{Address: 0xb, StackID: -1, Pages: 1, Bytes: uint64(math.Round(w)), Stderr: se(1)},
			}}},
		{"unresident", []event.Event{fault(0x1000, 0xa), fault(0x2000, 0xb), gone(0x2000), gone(0x5000)},
			&ResidentSnapshot{SampleBytes: mean, Pages: 1, Bytes: uint64(math.Round(w)), Stderr: se(1), Sites: []ResidentSite{
				{Address: 0xa, StackID: -1, Pages: 1, Bytes: uint64(math.Round(w)), Stderr: se(1)},
			}}},
		{"huge page", []event.Event{huge, fault(0x1000, 0xa), fault(0x9000, 0xb)},
			&ResidentSnapshot{SampleBytes: mean, Pages: 3, Bytes: uint64(math.Round(wh + 2*w)),
				Stderr: math.Sqrt(vh + se(2)*se(2)), Sites: []ResidentSite{
					{Address: 0xa, StackID: -1, Pages: 2, Bytes: uint64(math.Round(wh + w)), Stderr: math.Sqrt(vh + se(1)*se(1))},
					{Address: 0xb, StackID: -1, Pages: 1, Bytes: uint64(math.Round(w)), Stderr: se(1)},
				}}},
		{"all gone", []event.Event{fault(0x1000, 0xa), gone(0x1000)},
			&ResidentSnapshot{SampleBytes: mean}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := residentTable(tt.events)
			got := tab.Snapshot().Processes[0].Resident
			if !sameResident(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			wantPages := 0
			if tt.want != nil {
				wantPages = int(tt.want.Pages)
			}
			if n := len(tab.ResidentPages(1)) + len(tab.ResidentSpans(1)); n != wantPages {
				t.Errorf("ResidentPages and ResidentSpans: %d, want %d", n, wantPages)
			}
		})
	}
}

func sameResident(a, b *ResidentSnapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, y) }
	if a.SampleBytes != b.SampleBytes || a.Pages != b.Pages || a.Bytes != b.Bytes || !near(a.Stderr, b.Stderr) || len(a.Sites) != len(b.Sites) {
		return false
	}
	for i := range a.Sites {
		x, y := a.Sites[i], b.Sites[i]
		if x.Address != y.Address || x.StackID != y.StackID || x.Pages != y.Pages || x.Bytes != y.Bytes || !near(x.Stderr, y.Stderr) {
			return false
		}
	}
	return true
}

// residentTable is a table of process 1 with events applied.
func residentTable(events []event.Event) *Table {
	tab := NewTable()
	tab.AddProcess(1, "x")
	for i := range events {
		tab.Apply(&events[i])
	}
	return tab
}

// TestResidentUncharge: each sampled page that leaves the table is told to
// OnUncharge's function once (the live run's count of charged pages, which
// the probes compare to tell refaults), and Refault events drop the
// sampled pages in their range.
func TestResidentUncharge(t *testing.T) {
	fault := func(pid uint32, addr, size uint64) event.Event {
		return event.Event{Kind: event.Fault, PID: pid, Addr: addr, Size: size, OldSize: 65536, CallSite: 0xa, StackID: -1}
	}
	refault := func(pid uint32, addr, size uint64) event.Event {
		return event.Event{Kind: event.Refault, PID: pid, Addr: addr, Size: size, StackID: -1}
	}
	gone := func(addr uint64) event.Event {
		return event.Event{Kind: event.Unresident, PID: 1, Addr: addr, StackID: -1}
	}
	type page struct {
		pid  uint32
		addr uint64
	}
	tests := []struct {
		name      string
		events    []event.Event
		forget    bool // Forget(1) after the events
		uncharged []page
		left      []uint64 // process 1's pages still charged
	}{
		{"refault of a sampled page", []event.Event{fault(1, 0x1000, 4096), fault(1, 0x2000, 4096), refault(1, 0x2000, 4096)},
			false, []page{{1, 0x2000}}, []uint64{0x1000}},
		{"refault of another page", []event.Event{fault(1, 0x1000, 4096), refault(1, 0x3000, 4096), refault(2, 0x1000, 4096)},
			false, nil, []uint64{0x1000}},
		{"huge refault drops its range", []event.Event{fault(1, 0x1ff000, 4096), fault(1, 0x200000, 4096), fault(1, 0x3ff000, 4096),
			fault(1, 0x400000, 4096), refault(1, 0x200000, 2<<20)},
			false, []page{{1, 0x200000}, {1, 0x3ff000}}, []uint64{0x1ff000, 0x400000}},
		{"sampled again", []event.Event{fault(1, 0x1000, 4096), fault(1, 0x1000, 4096)},
			false, []page{{1, 0x1000}}, []uint64{0x1000}},
		{"huge sample over pages", []event.Event{fault(1, 0x201000, 4096), fault(1, 0x200000, 2<<20)},
			false, []page{{1, 0x201000}}, []uint64{0x200000}},
		// Before 6.2 a huge page's rest (2 MiB - 4 KiB) follows its first
		// 4 KiB's sample, which it must not drop.
		{"huge rest keeps the first page", []event.Event{fault(1, 0x201000, 4096), fault(1, 0x200000, 2<<20-4096)},
			false, nil, []uint64{0x200000, 0x201000}},
		{"unresident", []event.Event{fault(1, 0x1000, 4096), gone(0x1000), gone(0x1000), gone(0)},
			false, []page{{1, 0x1000}}, nil},
		{"forget", []event.Event{fault(1, 0x1000, 4096), fault(1, 0x5000, 4096)},
			true, []page{{1, 0x1000}, {1, 0x5000}}, nil},
		// A huge page's first page written again: the rest stays charged,
		// under the address the probes charged.
		{"refault of a huge sample's first page", []event.Event{fault(1, 0x200000, 2<<20), refault(1, 0x200000, 4096),
			refault(1, 0x200000, 4096)}, false, nil, []uint64{0x201000}},
		{"forget a huge sample rekeyed", []event.Event{fault(1, 0x200000, 2<<20), refault(1, 0x200000, 4096)},
			true, []page{{1, 0x200000}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			var got []page
			tab.OnUncharge(func(pid uint32, addr uint64) { got = append(got, page{pid, addr}) })
			for i := range tt.events {
				e := &tt.events[i]
				if e.Kind == event.Refault && !tab.Charged(e.PID, e.Addr, e.Size) {
					continue // as the live run: nothing sampled there
				}
				tab.Apply(e)
			}
			if tt.forget {
				tab.Forget(1)
			}
			slices.SortFunc(got, func(a, b page) int { return cmp.Compare(a.addr, b.addr) })
			if !slices.Equal(got, tt.uncharged) {
				t.Errorf("uncharged %v, want %v", got, tt.uncharged)
			}
			left := tab.ResidentPages(1)
			for _, s := range tab.ResidentSpans(1) {
				left = append(left, s.Addr)
			}
			if slices.Sort(left); !slices.Equal(left, tt.left) {
				t.Errorf("pages left %#x, want %#x", left, tt.left)
			}
			if tab.Known(2) {
				t.Errorf("a refault of a process with no sample registered it")
			}
		})
	}
}

// TestResidentMove: an Mremap or a Moved moves the sampled pages of its old
// range to the same offsets in the new one (still charged to their sites),
// telling OnMove of each; a stale sample at a destination is uncharged.
func TestResidentMove(t *testing.T) {
	fault := func(addr, site uint64) event.Event {
		return event.Event{Kind: event.Fault, PID: 1, Addr: addr, Size: 4096, OldSize: 65536, CallSite: site, StackID: -1}
	}
	mremap := func(old, oldSize, addr, size uint64) event.Event {
		return event.Event{Kind: event.Mremap, PID: 1, OldAddr: old, OldSize: oldSize, Addr: addr, Size: size, StackID: -1}
	}
	moved := func(old, oldSize, addr uint64) event.Event {
		return event.Event{Kind: event.Moved, PID: 1, OldAddr: old, OldSize: oldSize, Addr: addr, StackID: -1}
	}
	huge := func(addr uint64) event.Event {
		return event.Event{Kind: event.Fault, PID: 1, Addr: addr, Size: 2 << 20, OldSize: 65536, CallSite: 0xd, StackID: -1}
	}
	refault := func(addr uint64) event.Event {
		return event.Event{Kind: event.Refault, PID: 1, Addr: addr, Size: 4096, StackID: -1}
	}
	type move struct{ from, to uint64 }
	tests := []struct {
		name      string
		events    []event.Event
		moves     []move
		uncharged []uint64
		left      map[uint64]uint64 // page: site
		spans     []SampledSpan     // when not nil
	}{
		// A huge page moved over a stale sample inside its new range: the
		// stale one goes (it was kept, the page counted twice).
		{"a huge page over a stale sample", []event.Event{fault(0x805000, 0xa), huge(0x200000), moved(0x200000, 2<<20, 0x800000)},
			[]move{{0x200000, 0x800000}}, []uint64{0x805000}, map[uint64]uint64{0x800000: 0xd},
			[]SampledSpan{{Addr: 0x800000, Size: 2 << 20, Resident: 2 << 20, Start: 0x800000, End: 0xa00000}}},
		// Half a huge page moved: the half that moved with its key stays
		// charged, the other half is left behind, uncharged.
		{"half a huge page, with its key", []event.Event{huge(0x200000), moved(0x200000, 1<<20, 0x900000)},
			[]move{{0x200000, 0x900000}}, nil, map[uint64]uint64{0x900000: 0xd},
			[]SampledSpan{{Addr: 0x900000, Size: 2 << 20, Resident: 1 << 20, Start: 0x900000, End: 0xb00000, Holes: pageRange(0xa00000, 0xb00000)}}},
		{"half a huge page, not its key", []event.Event{huge(0x200000), moved(0x300000, 1<<20, 0x900000)},
			nil, nil, map[uint64]uint64{0x200000: 0xd},
			[]SampledSpan{{Addr: 0x200000, Size: 2 << 20, Resident: 1 << 20, Start: 0x200000, End: 0x400000, Holes: pageRange(0x300000, 0x400000)}}},
		// A span rekeyed (its first page written again) moves as the
		// address the probes charged.
		{"a rekeyed huge page", []event.Event{huge(0x200000), refault(0x200000), moved(0x200000, 2<<20, 0x800000)},
			[]move{{0x200000, 0x800000}}, nil, map[uint64]uint64{0x801000: 0xd},
			[]SampledSpan{{Addr: 0x801000, Size: 2 << 20, Resident: 2<<20 - 4096, Start: 0x800000, End: 0xa00000, Holes: []uint64{0x800000}}}},
		{"moved", []event.Event{fault(0x10000, 0xa), fault(0x13000, 0xb), fault(0x20000, 0xc), moved(0x10000, 0x10000, 0x80000)},
			[]move{{0x10000, 0x80000}, {0x13000, 0x83000}}, nil,
			map[uint64]uint64{0x20000: 0xc, 0x80000: 0xa, 0x83000: 0xb}, nil},
		{"mremap", []event.Event{fault(0x10000, 0xa), mremap(0x10000, 0x4000, 0x90000, 0x8000)},
			[]move{{0x10000, 0x90000}}, nil, map[uint64]uint64{0x90000: 0xa}, nil},
		{"in place", []event.Event{fault(0x10000, 0xa), mremap(0x10000, 0x4000, 0x10000, 0x8000)},
			nil, nil, map[uint64]uint64{0x10000: 0xa}, nil},
		{"over a stale sample", []event.Event{fault(0x10000, 0xa), fault(0x90000, 0xb), moved(0x10000, 0x1000, 0x90000)},
			[]move{{0x10000, 0x90000}}, []uint64{0x90000}, map[uint64]uint64{0x90000: 0xa}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			var moves []move
			var uncharged []uint64
			tab.OnMove(func(pid uint32, from, to uint64) { moves = append(moves, move{from, to}) })
			tab.OnUncharge(func(pid uint32, addr uint64) { uncharged = append(uncharged, addr) })
			for i := range tt.events {
				tab.Apply(&tt.events[i])
			}
			slices.SortFunc(moves, func(a, b move) int { return cmp.Compare(a.from, b.from) })
			if !slices.Equal(moves, tt.moves) {
				t.Errorf("moves %x, want %x", moves, tt.moves)
			}
			if !slices.Equal(uncharged, tt.uncharged) {
				t.Errorf("uncharged %#x, want %#x", uncharged, tt.uncharged)
			}
			got := map[uint64]uint64{}
			for a, pg := range tab.procs[1].resident.pages {
				got[a] = pg.site.addr
			}
			if !maps.Equal(got, tt.left) {
				t.Errorf("pages %#x, want %#x", got, tt.left)
			}
			if got := tab.ResidentSpans(1); tt.spans != nil && !reflect.DeepEqual(got, tt.spans) {
				t.Errorf("spans %+v, want %+v", got, tt.spans)
			}
			// The index holds each span once, and only those in spans.
			r := &tab.procs[1].resident
			for _, rs := range r.regions {
				for _, sp := range rs {
					if r.spans[sp.key] != sp {
						t.Errorf("a span in regions at %#x is not in spans", sp.key)
					}
				}
			}
		})
	}
}

// pageRange is the page addresses of [start, end).
func pageRange(start, end uint64) []uint64 {
	var out []uint64
	for a := start; a < end; a += pageSize {
		out = append(out, a)
	}
	return out
}

// TestFaultProbability: the chance of a 4 KiB fault at the documented means.
func TestFaultProbability(t *testing.T) {
	for _, tt := range []struct {
		mean uint64
		want float64
	}{{0, 1}, {4096, 1 - math.Exp(-1)}, {65536, 1 - math.Exp(-1.0/16)}} {
		if got := FaultProbability(4096, tt.mean); math.Abs(got-tt.want) > 1e-15 {
			t.Errorf("FaultProbability(4096, %d) = %v, want %v", tt.mean, got, tt.want)
		}
	}
}

// BenchmarkResidentPages: the memory a sampled page costs memtrace (B/op
// over pages: the table's map entry), e.g. 1M pages for a process with
// 64 GiB resident at the default 64 KiB.
func BenchmarkResidentPages(b *testing.B) {
	const pages = 1 << 20
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tab := NewTable()
		e := event.Event{Kind: event.Fault, PID: 1, Size: 4096, OldSize: 65536, CallSite: 0x1000, StackID: -1}
		for a := uint64(0); a < pages; a++ {
			e.Addr = a << 16
			e.CallSite = 0x1000 + a%64
			tab.Apply(&e)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pages, "ns/page")
}

// TestResidentSpans: a sampled fault larger than a page is checked as a
// span of pages (its huge page, or before 6.2 the rest of it), and an
// Unresident event with a size leaves it that many bytes, still weighed
// by its fault's chance; one with no size drops it.
func TestResidentSpans(t *testing.T) {
	const mean = 65536
	fault := func(addr, size uint64) event.Event {
		return event.Event{Kind: event.Fault, PID: 1, Addr: addr, Size: size, OldSize: mean, CallSite: 0xa, StackID: -1}
	}
	left := func(addr, size uint64) event.Event {
		return event.Event{Kind: event.Unresident, PID: 1, Addr: addr, Size: size, StackID: -1}
	}
	refault := func(addr, size uint64) event.Event {
		return event.Event{Kind: event.Refault, PID: 1, Addr: addr, Size: size, StackID: -1}
	}
	const huge = 2 << 20
	tests := []struct {
		name   string
		events []event.Event
		spans  []SampledSpan
		pages  []uint64
		bytes  float64 // the estimate
	}{
		{"a huge page", []event.Event{fault(0x200000, huge)},
			[]SampledSpan{{Addr: 0x200000, Size: huge, Resident: huge, Start: 0x200000, End: 0x400000}}, nil,
			huge / FaultProbability(huge, mean)},
		{"released in part", []event.Event{fault(0x200000, huge), left(0x200000, huge-65536)},
			[]SampledSpan{{Addr: 0x200000, Size: huge, Resident: huge - 65536, Start: 0x200000, End: 0x400000}}, nil,
			(huge - 65536) / FaultProbability(huge, mean)},
		{"never grows back", []event.Event{fault(0x200000, huge), left(0x200000, 65536), left(0x200000, 131072)},
			[]SampledSpan{{Addr: 0x200000, Size: huge, Resident: 65536, Start: 0x200000, End: 0x400000}}, nil,
			65536 / FaultProbability(huge, mean)},
		{"released", []event.Event{fault(0x200000, huge), left(0x200000, 0)}, nil, nil, 0},
		{"an mTHP folio", []event.Event{fault(0x210000, 65536)},
			[]SampledSpan{{Addr: 0x210000, Size: 65536, Resident: 65536, Start: 0x210000, End: 0x220000}}, nil,
			65536 / FaultProbability(65536, mean)},
		// Before 6.2: the fault's own 4 KiB, then the rest, at the second
		// page when the fault's page was the first (skipped), else at the first.
		{"6.1: the rest at the second page", []event.Event{fault(0x200000, 4096), fault(0x201000, huge-4096)},
			[]SampledSpan{{Addr: 0x201000, Size: huge - 4096, Resident: huge - 4096, Start: 0x200000, End: 0x400000, Holes: []uint64{0x200000}}},
			[]uint64{0x200000}, 4096/FaultProbability(4096, mean) + (huge-4096)/FaultProbability(huge-4096, mean)},
		// Moved by mremap off the 2 MiB alignment: the span moves with it.
		{"6.1: the rest at the second page, moved", []event.Event{fault(0x200000, 4096), fault(0x201000, huge-4096),
			{Kind: event.Moved, PID: 1, OldAddr: 0x200000, OldSize: huge, Addr: 0x7005000, StackID: -1}},
			[]SampledSpan{{Addr: 0x7006000, Size: huge - 4096, Resident: huge - 4096, Start: 0x7005000, End: 0x7205000, Holes: []uint64{0x7005000}}},
			[]uint64{0x7005000}, 4096/FaultProbability(4096, mean) + (huge-4096)/FaultProbability(huge-4096, mean)},
		{"6.1: the rest at the first page", []event.Event{fault(0x205000, 4096), fault(0x200000, huge-4096)},
			[]SampledSpan{{Addr: 0x200000, Size: huge - 4096, Resident: huge - 4096, Start: 0x200000, End: 0x400000}},
			[]uint64{0x205000}, 4096/FaultProbability(4096, mean) + (huge-4096)/FaultProbability(huge-4096, mean)},
		// Released in part, then written again: the pages written are no
		// longer the huge page's, and its first page's refault or a new
		// sample there leaves it the rest, keyed at its first page left.
		{"its first page written again", []event.Event{fault(0x200000, huge), left(0x200000, huge-65536), refault(0x200000, 4096)},
			[]SampledSpan{{Addr: 0x201000, Size: huge, Resident: huge - 65536, Start: 0x200000, End: 0x400000, Holes: []uint64{0x200000}}},
			nil, (huge - 65536) / FaultProbability(huge, mean)},
		{"a new sample at its first page", []event.Event{fault(0x200000, huge), fault(0x200000, 4096)},
			[]SampledSpan{{Addr: 0x201000, Size: huge, Resident: huge - 4096, Start: 0x200000, End: 0x400000, Holes: []uint64{0x200000}}},
			[]uint64{0x200000}, (huge-4096)/FaultProbability(huge, mean) + 4096/FaultProbability(4096, mean)},
		{"new samples inside", []event.Event{fault(0x200000, huge), fault(0x205000, 4096), fault(0x3ff000, 4096)},
			[]SampledSpan{{Addr: 0x200000, Size: huge, Resident: huge - 8192, Start: 0x200000, End: 0x400000, Holes: []uint64{0x205000, 0x3ff000}}},
			[]uint64{0x205000, 0x3ff000}, (huge-8192)/FaultProbability(huge, mean) + 2*4096/FaultProbability(4096, mean)},
		{"every page written again", []event.Event{fault(0x200000, huge), refault(0x200000, 4096), refault(0x201000, huge-4096)},
			nil, nil, 0},
		{"a huge page again", []event.Event{fault(0x200000, huge), refault(0x200000, 4096), fault(0x200000, huge)},
			[]SampledSpan{{Addr: 0x200000, Size: huge, Resident: huge, Start: 0x200000, End: 0x400000}}, nil,
			huge / FaultProbability(huge, mean)},
		// Before 6.2, a huge page released whole and faulted again (a Go
		// heap's churn): the new fault's pieces are told around its own
		// page, then its rest is sampled; the old rest is gone whole,
		// though the refaults left it its own page (it was charged for
		// that page on and on, and a rest at the same key doubled it).
		{"6.1: faulted again", []event.Event{fault(0x200000, 4096), fault(0x201000, huge-4096),
			refault(0x200000, 0x5000), refault(0x206000, huge-0x6000), fault(0x200000, huge-4096)},
			[]SampledSpan{{Addr: 0x200000, Size: huge - 4096, Resident: huge - 4096, Start: 0x200000, End: 0x400000}},
			nil, (huge - 4096) / FaultProbability(huge-4096, mean)},
		// Before 6.2: the rest's first page left is the fault's own, sampled
		// apart: the next one takes the key.
		{"6.1: the rest at the first page, written again", []event.Event{fault(0x201000, 4096), fault(0x200000, huge-4096), refault(0x200000, 4096)},
			[]SampledSpan{{Addr: 0x202000, Size: huge - 4096, Resident: huge - 4096, Start: 0x200000, End: 0x400000, Holes: []uint64{0x200000}}},
			[]uint64{0x201000}, 4096/FaultProbability(4096, mean) + (huge-4096)/FaultProbability(huge-4096, mean)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := residentTable(tt.events)
			if got := tab.ResidentSpans(1); !reflect.DeepEqual(got, tt.spans) {
				t.Errorf("spans %+v, want %+v", got, tt.spans)
			}
			if got := tab.ResidentPages(1); !slices.Equal(got, tt.pages) {
				t.Errorf("pages %#x, want %#x", got, tt.pages)
			}
			var got uint64
			if r := tab.Snapshot().Processes[0].Resident; r != nil {
				got = r.Bytes
			}
			if want := uint64(math.Round(tt.bytes)); got != want {
				t.Errorf("estimate %d bytes, want %d", got, want)
			}
		})
	}
}
