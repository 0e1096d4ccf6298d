package htmlreport

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/htmlreport/headless"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// liveSet is a BlockSource over a map of live blocks.
type liveSet map[uint64]struct {
	size uint64
	site aggregate.SiteKey
}

func (l liveSet) ForEachLiveSite(pid uint32, fn func(addr, size uint64, site aggregate.SiteKey) bool) {
	for a, b := range l {
		if !fn(a, b.size, b.site) {
			return
		}
	}
}

// TestMillionEvents: a run of a million events gives a page under 10 MB
// that chromium draws without errors; so does a sampled run of a million
// samples whose call sites are each broken down into 4 stacks of 16
// frames (sampled mode's stacks), named and all.
func TestMillionEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a million-event history")
	}
	for _, stacks := range []int{0, 4} {
		t.Run(fmt.Sprintf("stacks=%d", stacks), func(t *testing.T) { millionEventsPage(t, stacks) })
	}
}

func millionEventsPage(t *testing.T, stacks int) {
	h, final := millionEvents(stacks)
	src := pprofout.Sources{}
	if stacks > 0 {
		src = pprofout.Sources{Symbolizer: synthNames{}, Stacks: synthStacks{}}
	}
	var buf bytes.Buffer
	if err := Write(&buf, h, final, src, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("page: %d bytes", buf.Len())
	if buf.Len() >= 10<<20 {
		t.Errorf("page is %d bytes, want < 10 MB", buf.Len())
	}
	// It draws in headless chromium; how long it took is logged (-v),
	// not asserted: timings belong to benchmarks.
	path := filepath.Join(t.TempDir(), "big.html")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := headless.Load(t, path)
	if m := regexp.MustCompile(`data-draw-ms="(\d+)"`).FindStringSubmatch(dom); m != nil {
		t.Logf("drawn %s ms after navigation", m[1])
	}
}

// BenchmarkMillionEvents: feeding the collector a million events with
// their samples and heap-map moments, then writing the page.
func BenchmarkMillionEvents(b *testing.B) {
	for b.Loop() {
		h, final := millionEvents(0)
		if err := Write(io.Discard, h, final, pprofout.Sources{}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// millionEvents is the history of a synthetic run and its last snapshot:
// a million events, half allocations from 2000 call sites, half frees, up
// to ~100k blocks live, a sample every 500 events. With stacks > 0 each
// call site's allocations come from that many stacks, kept as the
// site's breakdown (aggregate.SiteSnapshot.Stacks).
func millionEvents(stacks int) (history.History, aggregate.Snapshot) {
	const events, sites, every = 1_000_000, 2000, 500
	rng := rand.New(rand.NewPCG(1, 2))
	c := history.New(history.Options{})
	live := liveSet{}
	var addrs []uint64
	stackOf := map[uint64]int{}
	stats := make([]aggregate.Stats, sites)
	parts := make([][]aggregate.Stats, sites)
	for s := range parts {
		parts[s] = make([]aggregate.Stats, max(stacks, 1))
	}
	var snap aggregate.Snapshot
	next := uint64(0x500000)
	for i := 0; i < events; i++ {
		now := uint64(i) * 1e6 // 1 ms apart: a 1000 s run
		if i%2 == 0 || len(addrs) == 0 || (len(addrs) < 100000 && rng.IntN(3) == 0) {
			s, j := rng.IntN(sites), rng.IntN(max(stacks, 1))
			size := uint64(16 << rng.IntN(10))
			live[next] = struct {
				size uint64
				site aggregate.SiteKey
			}{size, aggregate.SiteKey{Address: uint64(s) + 1, StackID: -1}}
			addrs = append(addrs, next)
			stackOf[next] = j
			for _, st := range []*aggregate.Stats{&stats[s], &parts[s][j]} {
				st.Allocs++
				st.AllocBytes += size
				st.LiveAllocs++
				st.LiveBytes += size
			}
			next += size + 16
			c.Observe(&event.Event{Kind: event.Alloc, PID: 1, Addr: next, Size: size, Time: now})
		} else {
			k := rng.IntN(len(addrs))
			a := addrs[k]
			addrs[k] = addrs[len(addrs)-1]
			addrs = addrs[:len(addrs)-1]
			b := live[a]
			delete(live, a)
			s := b.site.Address - 1
			for _, st := range []*aggregate.Stats{&stats[s], &parts[s][stackOf[a]]} {
				st.Frees++
				st.FreedBytes += b.size
				st.LiveAllocs--
				st.LiveBytes -= b.size
			}
			delete(stackOf, a)
			c.Observe(&event.Event{Kind: event.Free, PID: 1, Addr: a, Time: now})
		}
		if i%every == every-1 {
			ps := aggregate.ProcessSnapshot{PID: 1, Comm: "big", Sites: make([]aggregate.SiteSnapshot, sites),
				Rates: []aggregate.RateSnapshot{{AllocBytesPerSec: 1e6}, {AllocBytesPerSec: 2e6}, {AllocBytesPerSec: 3e6}}}
			for s := range ps.Sites {
				ps.Sites[s] = aggregate.SiteSnapshot{Address: uint64(s) + 1, StackID: -1, Stats: stats[s]}
				for j := 0; j < stacks; j++ {
					ps.Sites[s].Stacks = append(ps.Sites[s].Stacks, aggregate.StackShare{StackID: int32(s*stacks + j), Stats: parts[s][j]})
				}
				ps.Heap.LiveBytes += stats[s].LiveBytes
				ps.Heap.LiveAllocs += stats[s].LiveAllocs
			}
			snap = aggregate.Snapshot{Time: now, Processes: []aggregate.ProcessSnapshot{ps}}
			c.Sample(now, snap, live)
		}
	}
	return c.History(), snap
}

// synthNames names the synthetic run's code: a function per address, in
// a source file of a deep tree.
type synthNames struct{}

func (synthNames) Resolve(pid int, ret uint64) symbolize.Frame {
	return symbolize.Frame{Address: ret, Function: fmt.Sprintf("subsystem_%d::component_function_%d", ret%97, ret),
		File: fmt.Sprintf("/usr/src/project/subsystem_%d/component_%d.cc", ret%97, ret%500), Line: int(ret % 1000), Module: "/usr/lib/libbig.so"}
}

// synthStacks gives stack i of call site s (StackID s*n+i) 16 frames:
// the call site, 14 callers shared by the stacks of 50 sites, main.
type synthStacks struct{}

func (synthStacks) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	st := callstack.Stack{Frames: []symbolize.Frame{synthNames{}.Resolve(int(pid), site.Address)}}
	for d := uint64(1); d < 15; d++ {
		st.Frames = append(st.Frames, synthNames{}.Resolve(int(pid), 10000+d*1000+uint64(site.StackID)%(50*d)))
	}
	return callstack.Stack{Frames: append(st.Frames, symbolize.Frame{Function: "main", Module: "/usr/bin/big"})}
}
