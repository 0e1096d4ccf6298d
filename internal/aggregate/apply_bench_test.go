package aggregate

import (
	"math/rand/v2"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

// workload is a pre-generated event stream that leaves the table as it
// found it (the same addresses live), so it can be replayed any number of
// times on one table, which then stays in steady state.
type workload struct {
	setup  []event.Event // makes the starting live set
	stream []event.Event
}

// newWorkload builds a realistic mix: four processes taking turns in runs
// (as ring-buffer batches arrive), malloc/free pairs over a live set of
// about slots/2 blocks with reused addresses, about one call in six a
// realloc, call sites drawn from a Zipf distribution over the given
// number, and a few mmap/munmap pairs.
func newWorkload(events, slots, sites int) workload {
	const procs = 4
	rng := rand.New(rand.NewPCG(11, 12))
	zipf := rand.NewZipf(rng, 1.2, 8, uint64(sites-1))
	type slot struct{ at uint64 } // live address, 0 if none
	state := make([]slot, slots)
	// Each slot owns two addresses so that realloc can move a block.
	home := func(i int) uint64 { return 0x5555_0000_0000 + uint64(i)*64 }
	moved := func(i int) uint64 { return 0x7f55_0000_0000 + uint64(i)*64 }
	pidOf := func(i int) uint32 { return uint32(100 + i%procs) }
	startsLive := func(i int) bool { return i/procs%2 == 0 }
	site := func() uint64 { return 0x40_0000 + zipf.Uint64()*0x40 }
	size := func() uint64 { return 8 + uint64(rng.IntN(64))<<uint(rng.IntN(7)) }

	var w workload
	var ns uint64
	add := func(list *[]event.Event, e event.Event) {
		ns += 300
		e.Time = ns
		*list = append(*list, e)
	}
	for i := range slots {
		if !startsLive(i) {
			continue
		}
		state[i].at = home(i)
		add(&w.setup, event.Event{Kind: event.Alloc, PID: pidOf(i), Addr: home(i), Size: size(), CallSite: site()})
	}
	for len(w.stream) < events {
		pid := rng.IntN(procs)
		for range 1 + rng.IntN(64) { // a run of one process's events
			i := rng.IntN(slots/procs)*procs + pid
			s := &state[i]
			p := pidOf(i)
			switch r := rng.IntN(100); {
			case s.at == 0 && r < 90:
				s.at = home(i)
				add(&w.stream, event.Event{Kind: event.Alloc, PID: p, Addr: s.at, Size: size(), CallSite: site()})
			case s.at == 0:
				s.at = home(i)
				add(&w.stream, event.Event{Kind: event.Realloc, PID: p, Addr: s.at, Size: size(), CallSite: site()})
			case r < 75:
				add(&w.stream, event.Event{Kind: event.Free, PID: p, Addr: s.at})
				s.at = 0
			case r < 97:
				to := moved(i)
				if s.at == to {
					to = home(i)
				}
				add(&w.stream, event.Event{Kind: event.Realloc, PID: p, OldAddr: s.at, Addr: to, Size: size(), CallSite: site()})
				s.at = to
			case r < 99:
				add(&w.stream, event.Event{Kind: event.Realloc, PID: p, OldAddr: s.at, Addr: s.at, Size: size(), CallSite: site()})
			default:
				m := 0x7e00_0000_0000 + uint64(i)*0x10_0000
				add(&w.stream, event.Event{Kind: event.Mmap, PID: p, Addr: m, Size: 1 << 20, CallSite: site()})
				add(&w.stream, event.Event{Kind: event.Munmap, PID: p, Addr: m, Size: 1 << 20})
			}
		}
	}
	// Put back the starting live set so the stream can be replayed.
	for i := range state {
		s, p := &state[i], pidOf(i)
		switch {
		case startsLive(i) && s.at == 0:
			add(&w.stream, event.Event{Kind: event.Alloc, PID: p, Addr: home(i), Size: size(), CallSite: site()})
		case startsLive(i) && s.at != home(i):
			add(&w.stream, event.Event{Kind: event.Realloc, PID: p, OldAddr: s.at, Addr: home(i), Size: size(), CallSite: site()})
		case !startsLive(i) && s.at != 0:
			add(&w.stream, event.Event{Kind: event.Free, PID: p, Addr: s.at})
		}
	}
	return w
}

// BenchmarkApply measures the consumer: one op is one pass over a stream
// of about a million events on a table in steady state; events/s is the
// figure to read.
func BenchmarkApply(b *testing.B) {
	w := newWorkload(1_000_000, 400_000, 4000)
	tb := NewTable()
	for i := range w.setup {
		tb.Apply(&w.setup[i])
	}
	pass := func() {
		for i := range w.stream {
			tb.Apply(&w.stream[i])
		}
	}
	pass() // warm up: every site seen, tables grown
	b.ReportAllocs()
	for b.Loop() {
		pass()
	}
	n := float64(b.N) * float64(len(w.stream))
	b.ReportMetric(n/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")

	// The stream must have left things as it found them, or replaying it
	// measured something else (unmatched frees, double allocs).
	for _, p := range tb.Snapshot().Processes {
		if p.UnmatchedFrees != 0 || p.Heap.LiveAllocs != uint64(len(w.setup)/4) || p.Mapped.LiveAllocs != 0 {
			b.Fatalf("pid %d after replays: %d unmatched frees, %d live blocks (want %d), %d regions",
				p.PID, p.UnmatchedFrees, p.Heap.LiveAllocs, len(w.setup)/4, p.Mapped.LiveAllocs)
		}
	}
}
