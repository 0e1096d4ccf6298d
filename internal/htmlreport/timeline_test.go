package htmlreport

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

// gapHistory: 25 MiB live from the start (and 1 KiB more each sample), one sample every 100 ms to 1 s,
// none from 1 s to 2 s (memtrace busy), then again to 3 s; the heap's
// first footprint reading comes at sample read (26 MiB resident). Sampled,
// with a long mark label and command name: a long status line.
func gapHistory(read int) (history.History, aggregate.Snapshot) {
	c := history.New(history.Options{MapEvery: 200 * time.Millisecond})
	all := blocks{grow: run(25, 1<<20, 0x10000000)}
	var snap aggregate.Snapshot
	for i := 0; i <= 30; i++ {
		if i > 10 && i < 20 {
			continue // the gap
		}
		now := uint64(i) * 1e8
		if i == 3 {
			c.Mark(now, 4194303, "a-rather-long-mark-label-that-the-status-line-repeats", nil)
		}
		// Growing a little: the page opens at the end, after the mark.
		st := aggregate.Stats{Allocs: 25, AllocBytes: 25<<20 + uint64(i)<<10, LiveAllocs: 25, LiveBytes: 25<<20 + uint64(i)<<10}
		snap = aggregate.Snapshot{Time: now, SampleBytes: 512 << 10, Processes: []aggregate.ProcessSnapshot{{
			PID: 4194303, Comm: "a-long-command!", Heap: st, PeakLiveBytes: st.LiveBytes,
			Sites: []aggregate.SiteSnapshot{{Address: grow.Address, StackID: -1, Stats: st}},
			Rates: []aggregate.RateSnapshot{{HalfLife: time.Second, AllocBytesPerSec: 1e6, FreedBytesPerSec: 1e4, NetBytesPerSec: 5e3}},
		}}}
		if i >= read {
			snap.Processes[0].SetFootprint(footprint.Reading{HeapResident: 26 << 20})
		}
		c.Sample(now, snap, all)
	}
	return c.History(), snap
}

// TestTimelineGapsAndReadings: the heap-resident line starts at the first
// reading (no 0 B before it), in a colour and dash of its own; nothing is
// drawn across the gap with no data (a grey band is); the flame graph of a
// run without stacks says why it is one row; the page fits 1400 px.
func TestTimelineGapsAndReadings(t *testing.T) {
	h, final := gapHistory(5)
	page := writePage(t, h, final, Options{Title: "memtrace ./a-long-command! --with --some --arguments"})
	dom := headless.LoadSize(t, page, 1400, 1000)
	checks := []struct{ name, re string }{
		{"one gap", `<svg [^>]*data-gaps="1"`},
		{"resident from the first reading", `data-resident-from="5"`},
		{"resident style", `<path d="M[^"]*" fill="none" stroke="#111" stroke-width="2" stroke-dasharray="9 3 2 3" class="resident">`},
		{"gap band", `<rect class="gap" [^>]*><title>no data from t=1.00 s to t=2.00 s \(memtrace took no sample\)</title>`},
		{"flame note", `<p id="flame-note" class="note" style="">One row: this run kept each call site, not its call stack. ` +
			`Trace with --detail \(or replay a recording made with --detail\) to see whole call stacks here.</p>`},
		{"legend line", `<span[^>]*><i class="line" style="border-top: 2px dashed rgb\(17, 17, 17\);"></i>heap resident \(line\)</span>`},
		{"no overflow at 1400 px", `data-overflow-px="0"`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.re).MatchString(dom) {
			t.Errorf("%s: no match for %s", c.name, c.re)
		}
	}
	// Each line and area is two pieces, one each side of the gap; the
	// resident line's first starts at its first reading.
	for _, class := range []string{"layer", "mapped", "resident"} {
		m := regexp.MustCompile(`<path d="([^"]*)"[^>]*class="` + class + `"`).FindStringSubmatch(dom)
		if class == "mapped" {
			if m != nil {
				t.Errorf("a mapped line with nothing mapped")
			}
			continue
		}
		if m == nil || strings.Count(m[1], "M") != 2 {
			t.Errorf("%s path: %v, want two pieces", class, m)
		}
	}
	// The rates too.
	if m := regexp.MustCompile(`<path d="([^"]*)"[^>]*class="rate"`).FindStringSubmatch(dom); m == nil || strings.Count(m[1], "M") != 2 {
		t.Errorf("rate path: %v, want two pieces", m)
	}
	screenshot(t, page, "gaps")

	// A lone reading (a short run's, at its exit) is a dot: a line of one
	// point draws nothing.
	h, final = gapHistory(30)
	dom = headless.LoadSize(t, writePage(t, h, final, Options{}), 1400, 1000)
	if !regexp.MustCompile(`<circle cx="[0-9.]+" cy="[0-9.]+" r="4" fill="#111" stroke="#fff" class="resident-dot"></circle>`).MatchString(dom) {
		t.Errorf("no dot for a lone heap-resident reading")
	}
}

// screenshot photographs the page at 1400 px into $MEMTRACE_SHOTS (kept,
// to look at) or a temporary directory.
func screenshot(t *testing.T, page, name string) {
	t.Helper()
	dir := os.Getenv("MEMTRACE_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	png := filepath.Join(dir, name+".png")
	if err := headless.Screenshot(page, png, 1400, 1400); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() < 10_000 {
		t.Errorf("screenshot %s: %v, %v", png, fi, err)
	}
}

// TestTimelineCold: with --access the timeline draws the cold bytes as a
// line of its own from the first epoch, with a legend entry; the heap
// map's moments say which runs were cold (drawn grey).
func TestTimelineCold(t *testing.T) {
	c := history.New(history.Options{MapEvery: 200 * time.Millisecond})
	// The 25 blocks of 1 MiB: the last 15 cold.
	c.ColdRanges(7, func(start, end uint64) (bool, bool) { return start >= 0x10000000+10<<20, true })
	all := blocks{grow: run(25, 1<<20, 0x10000000)}
	var snap aggregate.Snapshot
	for i := 0; i <= 20; i++ {
		now := uint64(i) * 1e8
		if i >= 5 {
			c.Cold(7, uint64(i)<<20)
		}
		st := aggregate.Stats{Allocs: 25, AllocBytes: 25 << 20, LiveAllocs: 25, LiveBytes: 25 << 20}
		snap = aggregate.Snapshot{Time: now, Processes: []aggregate.ProcessSnapshot{{
			PID: 7, Comm: "prog", Heap: st, PeakLiveBytes: st.LiveBytes,
			Sites: []aggregate.SiteSnapshot{{Address: grow.Address, StackID: -1, Stats: st}},
		}}}
		c.Sample(now, snap, all)
	}
	page := writePage(t, c.History(), snap, Options{Title: "memtrace --access"})
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`"liveSizes":\[[0-9,]*\],"cold":\[(0,){10}1(,1){14}\]`).Match(src) {
		t.Errorf("the heap map's moments do not mark the 15 cold runs of 25: %s", regexp.MustCompile(`"cold":\[[0-9,]*\]`).FindAll(src, 3))
	}
	dom := headless.LoadSize(t, page, 1400, 1000)
	for _, c := range []struct{ name, re string }{
		{"cold line", `<path d="M[^"]*" fill="none" stroke="#1f77b4" stroke-width="2" stroke-dasharray="2 3" class="cold">`},
		{"its largest", `data-cold="20971520"`},
		{"legend", `cold \(line\)</span>`},
	} {
		if !regexp.MustCompile(c.re).MatchString(dom) {
			t.Errorf("%s: no match for %s", c.name, c.re)
		}
	}
}
