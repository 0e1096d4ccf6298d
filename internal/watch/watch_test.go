package watch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/testwait"
)

var defaults = Settings{HalfLives: []time.Duration{time.Second, 10 * time.Second, 100 * time.Second}, Period: 100 * time.Millisecond}

func TestAdjust(t *testing.T) {
	// Doubling 1s keeps the period.
	next, msg, err := Adjust(defaults, defaults.Period, 0, 2*time.Second)
	if err != nil || next.Period != defaults.Period || next.HalfLives[0] != 2*time.Second || defaults.HalfLives[0] != time.Second {
		t.Fatalf("double 1s: %+v %q %v", next, msg, err)
	}
	// 800s needs a period of at least 800s/4096 = 195.3125ms: adjusted.
	next, msg, err = Adjust(defaults, defaults.Period, 2, 800*time.Second)
	if err != nil || next.Period != 195312500*time.Nanosecond || !strings.Contains(msg, "period 100ms -> 195.3125ms") {
		t.Fatalf("800s: %+v %q %v", next, msg, err)
	}
	if err := aggregate.CheckHalfLives(next.Period, next.HalfLives); err != nil {
		t.Fatal(err)
	}
	// Back to 100s: the period returns to the configured one.
	back, msg, err := Adjust(next, defaults.Period, 2, 100*time.Second)
	if err != nil || back.Period != defaults.Period || !strings.Contains(msg, "period 195.3125ms -> 100ms") {
		t.Fatalf("reset: %+v %q %v", back, msg, err)
	}
	// Halving 1s to 62.5ms: the period must drop below it.
	s := defaults
	for i := 0; i < 4; i++ {
		s, _, err = Adjust(s, defaults.Period, 0, s.HalfLives[0]/2)
		if err != nil {
			t.Fatalf("halving #%d: %v", i+1, err)
		}
	}
	if s.HalfLives[0] != 62500*time.Microsecond || s.Period >= s.HalfLives[0] {
		t.Fatalf("after 4 halvings: %+v", s)
	}
	// 1s and 100s with 1ms: no period allows 1ms and 100s together.
	_, _, err = Adjust(defaults, defaults.Period, 0, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "half-life 1ms refused") || !strings.Contains(err.Error(), "period 100ms") {
		t.Fatalf("1ms with 100s: %v", err)
	}
}

func TestBars(t *testing.T) {
	if barCells(0, 34) != 0 || barCells(1, 34) != 0 || barCells(-5, 0) != 0 {
		t.Error("empty bars")
	}
	// Log scale: 1 KiB/s is 10/34 of the width, 1 MiB/s 20/34, negative by magnitude.
	if got := barCells(1024, 34); got != 80 {
		t.Errorf("1 KiB/s: %d eighths, want 80", got)
	}
	if got := barCells(-(1 << 20), 34); got != 160 {
		t.Errorf("-1 MiB/s: %d eighths, want 160", got)
	}
	if got := barCells(1<<40, 34); got != 34*8 {
		t.Errorf("beyond the scale: %d", got)
	}
	if got := barString(1<<20, 34); strings.Count(got, "█") != 20 || len([]rune(got)) != 34 {
		t.Errorf("bar %q", got)
	}
	if got := axis(34); !strings.HasPrefix(got[10:], "1K") || !strings.HasPrefix(got[20:], "1M") {
		t.Errorf("axis %q", got)
	}
}

type fakeSym map[uint64]string

func (f fakeSym) Resolve(pid int, ret uint64) symbolize.Frame {
	return symbolize.Frame{Address: ret, Function: f[ret], File: "x.c", Line: 7, Module: "/bin/x"}
}

func frame() Frame {
	mk := func(a, f float64) []aggregate.RateSnapshot {
		var rs []aggregate.RateSnapshot
		for _, h := range defaults.HalfLives {
			rs = append(rs, aggregate.RateSnapshot{HalfLife: h, AllocBytesPerSec: a, FreedBytesPerSec: f, NetBytesPerSec: a - f})
		}
		return rs
	}
	return Frame{
		Settings: defaults,
		Snap: aggregate.Snapshot{Time: 12_345_000_000, Processes: []aggregate.ProcessSnapshot{{
			PID: 42, Comm: "rate", Heap: aggregate.Stats{LiveBytes: 50 << 20, AllocBytes: 60 << 20},
			Rates: mk(10<<20, 2<<20),
			Sites: []aggregate.SiteSnapshot{
				{Address: 0x10, Stats: aggregate.Stats{LiveBytes: 50 << 20, AllocBytes: 50 << 20}, Rates: mk(10<<20, 0)},
				{Address: 0x20, Stats: aggregate.Stats{LiveBytes: 1 << 20, AllocBytes: 10 << 20}, Rates: mk(0, 2<<20)},
			},
		}}},
	}
}

// screenText returns the simulation screen's lines.
func screenText(s tcell.SimulationScreen) []string {
	cells, w, h := s.GetContents()
	lines := make([]string, h)
	for y := 0; y < h; y++ {
		var b strings.Builder
		for x := 0; x < w; x++ {
			r := cells[y*w+x].Runes
			if len(r) == 0 {
				b.WriteByte(' ')
				continue
			}
			b.WriteString(string(r))
		}
		lines[y] = strings.TrimRight(b.String(), " ")
	}
	return lines
}

// viewText reads the screen on the view's goroutine, which draws on it.
func viewText(v *View, s tcell.SimulationScreen) []string {
	var lines []string
	done := make(chan struct{})
	v.do <- func() { lines = screenText(s); close(done) }
	<-done
	return lines
}

// waitFor polls the screen until every want appears, or fails.
func waitFor(t *testing.T, v *View, s tcell.SimulationScreen, want ...string) string {
	t.Helper()
	var text string
	testwait.For(t, fmt.Sprintf("the screen to show %q", want), func() bool {
		text = strings.Join(viewText(v, s), "\n")
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	})
	return text
}

// waitTaken waits until the view has taken the frame Show gave it: its
// loop receives a frame and draws it before it runs anything else.
func waitTaken(t *testing.T, v *View) {
	t.Helper()
	testwait.For(t, "the view to take its frame", func() bool {
		n := 0
		done := make(chan struct{})
		v.do <- func() { n = len(v.frames); close(done) }
		<-done
		return n == 0
	})
}

func TestViewDrawsAndHandlesKeys(t *testing.T) {
	scr := tcell.NewSimulationScreen("UTF-8")
	v, err := Start(Options{Screen: scr, Symbolizer: fakeSym{0x10: "steady_alloc", 0x20: "drain"}, Sort: report.SortLive, Configured: defaults})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	scr.SetSize(120, 30)
	waitFor(t, v, scr, "waiting for the first sample")
	v.Show(frame())
	text := waitFor(t, v, scr, "pid 42 rate", "allocated/s", "10.0 MiB", "steady_alloc", "x.c:7", "1M", "sort: live")
	if !strings.Contains(text, "████") {
		t.Errorf("no bars:\n%s", text)
	}
	lines := viewText(v, scr)
	steady, drain := -1, -1
	for i, l := range lines {
		if strings.Contains(l, "steady_alloc") {
			steady = i
		}
		if strings.Contains(l, "drain") {
			drain = i
		}
	}
	if steady < 0 || drain < 0 || steady > drain {
		t.Fatalf("by live, steady_alloc should come first:\n%s", text)
	}

	// s cycles the sort: live -> allocated -> allocs -> rate.
	for _, want := range []string{"sort: allocated", "sort: allocs", "sort: rate"} {
		scr.InjectKey(tcell.KeyRune, 's', tcell.ModNone)
		waitFor(t, v, scr, want)
	}
	// Resize: redrawn at the new size.
	scr.SetSize(90, 20)
	scr.PostEvent(tcell.NewEventResize(90, 20))
	waitFor(t, v, scr, "pid 42 rate", "steady_alloc")

	// + doubles the selected (first) half-life; the session gets it.
	scr.InjectKey(tcell.KeyRune, '+', tcell.ModNone)
	select {
	case s := <-v.Changes():
		if s.HalfLives[0] != 2*time.Second || s.Period != defaults.Period {
			t.Errorf("after +: %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change delivered")
	}
	waitFor(t, v, scr, "half-life #1: 1s -> 2s")
	// 3 picks 100s; + + + asks for 800s: the period is adjusted.
	scr.InjectKey(tcell.KeyRune, '3', tcell.ModNone)
	for i := 0; i < 3; i++ {
		scr.InjectKey(tcell.KeyRune, '+', tcell.ModNone)
		<-v.Changes()
	}
	waitFor(t, v, scr, "period 100ms -> 195.3125ms")
	// p pauses: a new frame is not shown until p again.
	scr.InjectKey(tcell.KeyRune, 'p', tcell.ModNone)
	waitFor(t, v, scr, "[PAUSED]")
	f := frame()
	f.Snap.Processes[0].Comm = "renamed"
	v.Show(f)
	waitTaken(t, v)
	if strings.Contains(strings.Join(viewText(v, scr), "\n"), "renamed") {
		t.Error("a paused view took a new frame")
	}
	scr.InjectKey(tcell.KeyRune, 'p', tcell.ModNone)
	waitFor(t, v, scr, "pid 42 renamed")

	// q asks the session to quit.
	scr.InjectKey(tcell.KeyRune, 'q', tcell.ModNone)
	select {
	case <-v.Quit():
	case <-time.After(5 * time.Second):
		t.Fatal("q did not ask to quit")
	}
	waitFor(t, v, scr, "[quitting]")
}

// hostFrame is a whole host's frame: a traced process that made 8 MiB
// resident at two sites, an idle one with a larger RSS and none.
func hostFrame() Frame {
	res := &aggregate.ResidentSnapshot{SampleBytes: 64 << 10, Bytes: 8 << 20, Pages: 128, Stderr: 1000,
		Sites: []aggregate.ResidentSite{{Address: 0x10, Bytes: 6 << 20, Pages: 96}, {Address: 0x20, Bytes: 2 << 20, Pages: 32}}}
	return Frame{Settings: defaults, Snap: aggregate.Snapshot{Time: 5e9, Processes: []aggregate.ProcessSnapshot{
		{PID: 42, Comm: "busy", Resident: res, Footprint: &footprint.Reading{RSS: 30 << 20, RSSAnon: 20 << 20, RSSFile: 10 << 20, PSS: 25 << 20}},
		{PID: 7, Comm: "idle", Untraced: true, Footprint: &footprint.Reading{RSS: 100 << 20, RSSAnon: 100 << 20, Swap: 1 << 20, PSS: 100 << 20}},
	}}}
}

// TestViewHost: the whole host's view is a table by RSS, the first row
// selected with its resident sites; ↓ selects the next; s cycles the
// footprint keys; no allocator panel without Heap.
func TestViewHost(t *testing.T) {
	scr := tcell.NewSimulationScreen("UTF-8")
	v, err := Start(Options{Screen: scr, Symbolizer: fakeSym{0x10: "make_pages", 0x20: "memset_tail"}, Sort: report.SortLive,
		Configured: defaults, Host: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	scr.SetSize(132, 30)
	v.Show(hostFrame())
	text := waitFor(t, v, scr, "sort: rss", "2 processes by RSS, 1 traced", "100.0 MiB", "pid 7 idle",
		"no fault sampled, no allocation seen while traced", "↑/↓ select")
	if strings.Index(text, "      7  idle") > strings.Index(text, "     42  busy") || strings.Contains(text, "allocated/s") {
		t.Errorf("idle (100 MiB) should lead busy (30 MiB), with no allocator panel:\n%s", text)
	}
	scr.InjectKey(tcell.KeyDown, 0, tcell.ModNone)
	text = waitFor(t, v, scr, "pid 42 busy", "made resident while traced: ~8.0 MiB", "make_pages", "memset_tail")
	if strings.Index(text, "make_pages") > strings.Index(text, "memset_tail") {
		t.Errorf("sites not by resident bytes:\n%s", text)
	}
	scr.InjectKey(tcell.KeyUp, 0, tcell.ModNone)
	waitFor(t, v, scr, "pid 7 idle")
	// s: rss -> anon -> pss -> swap -> resident; by resident busy leads,
	// and the selection follows the process, not the row.
	for _, want := range []string{"sort: anon", "sort: pss", "sort: swap", "sort: resident"} {
		scr.InjectKey(tcell.KeyRune, 's', tcell.ModNone)
		waitFor(t, v, scr, want)
	}
	text = waitFor(t, v, scr, "processes by memory made resident while traced", "pid 7 idle")
	if strings.Index(text, "     42  busy") > strings.Index(text, "      7  idle") {
		t.Errorf("by resident, busy should lead:\n%s", text)
	}
}

// TestViewEscapesNames: a comm and a function named with escape sequences
// are drawn as escaped text: no cell of the screen holds a control.
func TestViewEscapesNames(t *testing.T) {
	scr := tcell.NewSimulationScreen("UTF-8")
	v, err := Start(Options{Screen: scr, Symbolizer: fakeSym{0x10: "f\x1b[2J", 0x20: "g\xff"}, Sort: report.SortLive, Configured: defaults})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	scr.SetSize(120, 30)
	f := frame()
	f.Snap.Processes[0].Comm = "\x1b]0;PWN\x07"
	v.Show(f)
	text := waitFor(t, v, scr, `pid 42 \x1b]0;PWN\x07`, `f\x1b[2J`, `g\xff`)
	for _, r := range text {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			t.Fatalf("control %U on screen:\n%s", r, text)
		}
	}
}
