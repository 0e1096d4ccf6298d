package htmlreport

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/history"
	"github.com/memtrace/memtrace/htmlreport/headless"
	"github.com/memtrace/memtrace/pprofout"
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
// that chromium draws without errors.
func TestMillionEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a million-event history")
	}
	h := millionEvents()
	var buf bytes.Buffer
	if err := Write(&buf, h, aggregate.Snapshot{}, pprofout.Sources{}, Options{}); err != nil {
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
		if err := Write(io.Discard, millionEvents(), aggregate.Snapshot{}, pprofout.Sources{}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// millionEvents is the history of a synthetic run: a million events, half
// allocations from 2000 call sites, half frees, up to ~100k blocks live,
// a sample every 500 events.
func millionEvents() history.History {
	const events, sites, every = 1_000_000, 2000, 500
	rng := rand.New(rand.NewPCG(1, 2))
	c := history.New(history.Options{})
	live := liveSet{}
	var addrs []uint64
	stats := make([]aggregate.Stats, sites)
	next := uint64(0x500000)
	for i := 0; i < events; i++ {
		now := uint64(i) * 1e6 // 1 ms apart: a 1000 s run
		if i%2 == 0 || len(addrs) == 0 || (len(addrs) < 100000 && rng.IntN(3) == 0) {
			s := rng.IntN(sites)
			size := uint64(16 << rng.IntN(10))
			live[next] = struct {
				size uint64
				site aggregate.SiteKey
			}{size, aggregate.SiteKey{Address: uint64(s) + 1, StackID: -1}}
			addrs = append(addrs, next)
			next += size + 16
			stats[s].Allocs++
			stats[s].AllocBytes += size
			stats[s].LiveAllocs++
			stats[s].LiveBytes += size
			c.Observe(&event.Event{Kind: event.Alloc, PID: 1, Addr: next, Size: size, Time: now})
		} else {
			j := rng.IntN(len(addrs))
			a := addrs[j]
			addrs[j] = addrs[len(addrs)-1]
			addrs = addrs[:len(addrs)-1]
			b := live[a]
			delete(live, a)
			s := b.site.Address - 1
			stats[s].Frees++
			stats[s].FreedBytes += b.size
			stats[s].LiveAllocs--
			stats[s].LiveBytes -= b.size
			c.Observe(&event.Event{Kind: event.Free, PID: 1, Addr: a, Time: now})
		}
		if i%every == every-1 {
			ps := aggregate.ProcessSnapshot{PID: 1, Comm: "big", Sites: make([]aggregate.SiteSnapshot, sites),
				Rates: []aggregate.RateSnapshot{{AllocBytesPerSec: 1e6}, {AllocBytesPerSec: 2e6}, {AllocBytesPerSec: 3e6}}}
			for s := range ps.Sites {
				ps.Sites[s] = aggregate.SiteSnapshot{Address: uint64(s) + 1, StackID: -1, Stats: stats[s]}
				ps.Heap.LiveBytes += stats[s].LiveBytes
				ps.Heap.LiveAllocs += stats[s].LiveAllocs
			}
			c.Sample(now, aggregate.Snapshot{Time: now, Processes: []aggregate.ProcessSnapshot{ps}}, live)
		}
	}
	return c.History()
}
