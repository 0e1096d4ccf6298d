package htmlreport

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/htmlreport/headless"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/symbolize"
)

type names map[uint64]string

func (n names) Resolve(pid int, ret uint64) symbolize.Frame {
	return symbolize.Frame{Address: ret, Function: n[ret], File: "phases.c", Line: int(ret), Module: "/bin/phases"}
}

// blocks is a BlockSource of fixed blocks per site.
type blocks map[aggregate.SiteKey][][2]uint64

func (b blocks) ForEachLiveSite(pid uint32, fn func(addr, size uint64, site aggregate.SiteKey) bool) {
	for k, bs := range b {
		for _, x := range bs {
			if !fn(x[0], x[1], k) {
				return
			}
		}
	}
}

var (
	grow   = aggregate.SiteKey{Address: 10, StackID: -1}
	spike  = aggregate.SiteKey{Address: 20, StackID: -1}
	settle = aggregate.SiteKey{Address: 30, StackID: -1}
)

func run(n int, size, base uint64) [][2]uint64 {
	var out [][2]uint64
	for i := 0; i < n; i++ {
		out = append(out, [2]uint64{base + uint64(i)*(size+16), size})
	}
	return out
}

// phases is testdata/phases.c's history, made by hand: grow() keeps 1 MB
// from 0.3 s, spike() adds 2 MB from 0.6 s to 1.2 s, settle() 40960 bytes
// from 1.2 s; one sample every 100 ms, a mark at each phase.
func phases(t *testing.T) (history.History, aggregate.Snapshot) {
	c := history.New(history.Options{MapEvery: 200 * time.Millisecond})
	all := blocks{}
	var snap aggregate.Snapshot
	for i := 0; i <= 18; i++ {
		now := uint64(i) * 1e8
		live := map[aggregate.SiteKey]uint64{}
		switch {
		case i == 3:
			c.Mark(now, 1, "grow", nil)
			all[grow] = run(100, 10000, 0x10000)
			for range 100 {
				c.Observe(&event.Event{Kind: event.Alloc, PID: 1, Size: 10000})
			}
		case i == 6:
			c.Mark(now, 1, "spike", nil)
			all[spike] = run(40, 50000, 0x200000)
			for range 40 {
				c.Observe(&event.Event{Kind: event.Alloc, PID: 1, Size: 50000})
			}
		case i == 12:
			c.Mark(now, 1, "settle", nil)
			delete(all, spike)
			all[settle] = run(10, 4096, 0x10000+100*10016)
		}
		var heap aggregate.Stats
		var sites []aggregate.SiteSnapshot
		for k, bs := range all {
			for _, b := range bs {
				live[k] += b[1]
			}
			st := aggregate.Stats{Allocs: uint64(len(bs)), AllocBytes: live[k], LiveAllocs: uint64(len(bs)), LiveBytes: live[k]}
			heap.LiveBytes += live[k]
			heap.LiveAllocs += uint64(len(bs))
			sites = append(sites, aggregate.SiteSnapshot{Address: k.Address, StackID: -1, Stats: st})
		}
		snap = aggregate.Snapshot{Time: now, Processes: []aggregate.ProcessSnapshot{{
			PID: 1, Comm: "phases", Heap: heap, PeakLiveBytes: 3000000, Sites: sites,
			Rates: []aggregate.RateSnapshot{{HalfLife: time.Second, AllocBytesPerSec: float64(i) * 1e5, FreedBytesPerSec: 1e4, NetBytesPerSec: -5e3}},
		}}}
		if i < 6 {
			snap.Processes[0].PeakLiveBytes = heap.LiveBytes
		}
		c.Sample(now, snap, all)
	}
	return c.History(), snap
}

func writePage(t *testing.T, h history.History, final aggregate.Snapshot, o Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, h, final, pprofout.Sources{Symbolizer: names{10: "grow", 20: "spike", 30: "settle"}}, o); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

// TestPage: the page renders in headless chromium without errors; every
// section is drawn; the peak and the marks are labelled; the timeline's
// maximum equals the peak; the heap map colours the legend's sites.
func TestPage(t *testing.T) {
	h, final := phases(t)
	dom := headless.Load(t, writePage(t, h, final, Options{Title: "phases"}))
	for _, id := range []string{"timeline", "rates", "flame", "heapmap", "sizes"} {
		if !regexp.MustCompile(`<section id="` + id + `"[^>]*data-drawn="1"`).MatchString(dom) {
			t.Errorf("section %s not drawn", id)
		}
	}
	if m := regexp.MustCompile(`data-max="(\d+)" data-peak="(\d+)"`).FindStringSubmatch(dom); m == nil || m[1] != "3000000" || m[2] != "3000000" {
		t.Errorf("timeline max/peak = %v, want 3000000 both", m)
	}
	if !strings.Contains(dom, `id="peak-label"`) || !strings.Contains(dom, ">peak 2.86 MiB<") {
		t.Errorf("no peak label")
	}
	var marks []string
	for _, m := range regexp.MustCompile(`class="mark-label">([^<]*)<`).FindAllStringSubmatch(dom, -1) {
		marks = append(marks, m[1])
	}
	if strings.Join(marks, ",") != "grow,spike,settle" {
		t.Errorf("mark labels %q", marks)
	}
	// The flame graph starts at the peak: spike and grow, largest first.
	var frames []string
	for _, m := range regexp.MustCompile(`<div class="frame"[^>]*>([^<]*)<`).FindAllStringSubmatch(dom, -1) {
		frames = append(frames, m[1])
	}
	if strings.Join(frames, ",") != "all,spike,grow" {
		t.Errorf("flame graph frames %q", frames)
	}
	var legend []string
	for _, m := range regexp.MustCompile(`<span[^>]*><i style="background: ([^;]*);"></i>([^<]*)</span>`).FindAllStringSubmatch(dom, -1) {
		legend = append(legend, m[2]+"="+m[1])
	}
	if got := strings.Join(legend, " "); got != "spike=rgb(78, 121, 167) grow=rgb(242, 142, 43) settle=rgb(225, 87, 89) other call sites=rgb(186, 176, 172)" {
		t.Errorf("legend %s", got)
	}
}

// TestColors: --colors rules win over the palette.
func TestColors(t *testing.T) {
	rules, err := ParseColors(strings.NewReader("# mine\ngr* #00ff00\nphases red\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0] != (ColorRule{"gr*", "#00ff00"}) || rules[1] != (ColorRule{"phases", "red"}) {
		t.Fatalf("rules %+v", rules)
	}
	for _, bad := range []string{"nocolor", "a #12345", "[ red"} {
		if _, err := ParseColors(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	h, final := phases(t)
	var buf bytes.Buffer
	rules = rules[:1]
	if err := Write(&buf, h, final, pprofout.Sources{Symbolizer: names{10: "grow", 20: "spike", 30: "settle"}}, Options{Colors: rules}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"label":"grow","full":"grow","loc":"phases.c:10","module":"phases","color":"#00ff00"`) {
		t.Errorf("grow is not green")
	}
}

// TestOffline: nothing in the page can make a request.
func TestOffline(t *testing.T) {
	h, final := phases(t)
	b, err := os.ReadFile(writePage(t, h, final, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{" src=", " href=", "url(", "@import", "fetch(", "XMLHttpRequest"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("page contains %q", bad)
		}
	}
	if !bytes.Contains(b, []byte("default-src 'none'")) {
		t.Errorf("no content security policy")
	}
}
