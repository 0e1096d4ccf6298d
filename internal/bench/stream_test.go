package bench

import (
	"math/rand/v2"

	"github.com/memtrace/memtrace/internal/event"
)

// churnStream is a cycle of 2*steps events that a table can replay forever
// in steady state: step j frees the block allocated `live` steps earlier
// and allocates a new one, as a program with `live` blocks in flight
// would. Sizes and call sites (Zipf over `sites`) are fixed per step, so
// every cycle is the same. The first cycle's first `live` frees are
// unmatched (nothing allocated yet): replay one cycle before timing.
func churnStream(steps, live, sites int) []event.Event {
	rng := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(rng, 1.2, 8, uint64(sites-1))
	addr := func(j int) uint64 { return 0x5555_0000_0000 + uint64(j)*80 }
	out := make([]event.Event, 0, 2*steps)
	var ns uint64
	for j := range steps {
		ns += 150
		out = append(out, event.Event{Kind: event.Free, Func: event.FuncFree, PID: 1000, TID: 1000,
			Time: ns, Addr: addr((j - live + steps) % steps)})
		ns += 150
		out = append(out, event.Event{Kind: event.Alloc, Func: event.FuncMalloc, PID: 1000, TID: 1000,
			Time: ns, Addr: addr(j), Size: 8 + uint64(rng.IntN(64))<<uint(rng.IntN(7)),
			CallSite: 0x40_0000 + zipf.Uint64()*0x40})
	}
	return out
}
