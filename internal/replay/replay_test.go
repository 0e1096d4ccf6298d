package replay

import (
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

func TestParseAt(t *testing.T) {
	tests := []struct {
		in   string
		want At
		bad  bool
	}{
		{in: "", want: At{}},
		{in: "12.5s", want: At{kind: "time", time: 12500 * time.Millisecond}},
		{in: "3", want: At{kind: "time", time: 3 * time.Second}},
		{in: "peak", want: At{kind: "peak"}},
		{in: "mark:loaded", want: At{kind: "mark", label: "loaded", nth: 1}},
		{in: "mark:a#b#3", want: At{kind: "mark", label: "a#b", nth: 3}},
		{in: "mark:x#0", bad: true},
		{in: "soon", bad: true},
	}
	for _, tc := range tests {
		got, err := ParseAt(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseAt(%q) = %+v, %v; want %+v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// writeRun records a run without a kernel: one process, a block of 1000
// bytes per second for ten seconds, each freed three seconds later, a mark
// "five" at 5 s; ticks every second.
func writeRun(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.rec")
	const start = uint64(1000e9)
	w, err := recording.Create(path, recording.Info{StartNS: start, Mode: "pid"})
	if err != nil {
		t.Fatal(err)
	}
	tb := aggregate.NewTable()
	tb.SetObserver(w)
	tb.SetPeakTolerance(aggregate.PeakTolerance{})
	tb.SetHalfLives([]time.Duration{time.Second}, start)
	tb.AddProcess(9, "run")
	for s := uint64(1); s <= 10; s++ {
		now := start + s*1e9
		tb.Apply(&event.Event{PID: 9, Time: now, Kind: event.Alloc, Func: event.FuncMalloc, Addr: 0x1000 * s, Size: 1000, CallSite: 0x401000, StackID: -1})
		if s > 3 {
			tb.Apply(&event.Event{PID: 9, Time: now, Kind: event.Free, Func: event.FuncFree, Addr: 0x1000 * (s - 3)})
		}
		if s == 5 {
			tb.Mark(9, "five", now)
		}
		tb.Tick(now)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReplayAt(t *testing.T) {
	path := writeRun(t)
	tests := []struct {
		at          string
		live, alloc uint64
		marks       int
	}{
		{"", 3000, 10000, 1},
		{"2.5s", 2000, 2000, 0},
		{"4s", 3000, 4000, 0},
		{"mark:five", 3000, 5000, 1},
		{"peak", 4000, 4000, 0}, // at 4 s, after the allocation, before the free
	}
	for _, tc := range tests {
		at, err := ParseAt(tc.at)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := replay(&ReplayConfig{File: path, At: at}, io.Discard)
		if err != nil || rp.missing != "" {
			t.Fatalf("--at %q: %v %s", tc.at, err, rp.missing)
		}
		p := rp.snap.Processes[0]
		if p.Heap.LiveBytes != tc.live || p.Heap.AllocBytes != tc.alloc || len(rp.snap.Marks) != tc.marks {
			t.Errorf("--at %q: live %d allocated %d, %d marks; want %d, %d, %d", tc.at, p.Heap.LiveBytes, p.Heap.AllocBytes,
				len(rp.snap.Marks), tc.live, tc.alloc, tc.marks)
		}
	}
	at, _ := ParseAt("mark:five#2")
	if rp, _ := replay(&ReplayConfig{File: path, At: at}, io.Discard); rp.missing == "" {
		t.Errorf("a second mark 'five' was found")
	}
}

// TestReplayHistory: with --html, the replay samples the history at each
// recorded tick and gives it the marks, up to --at; the page's last moment
// is the one replayed.
func TestReplayHistory(t *testing.T) {
	path := writeRun(t)
	const start = uint64(1000e9)
	tests := []struct {
		at    string
		ticks int // samples at 1 s, 2 s, ...
		marks int
		end   uint64
	}{
		{"", 10, 1, start + 10e9},
		{"4s", 4, 0, start + 4e9},
		{"mark:five", 4, 1, start + 5e9}, // the tick at 5 s comes after the mark
	}
	for _, tc := range tests {
		at, err := ParseAt(tc.at)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := replay(&ReplayConfig{File: path, At: at, ExportFiles: pipeline.ExportFiles{HTMLFile: "page.html"}}, io.Discard)
		if err != nil || rp.history == nil {
			t.Fatalf("--at %q: %v, history %v", tc.at, err, rp.history)
		}
		h := rp.history.History()
		if len(h.Processes) != 1 {
			t.Fatalf("--at %q: %d processes in the history", tc.at, len(h.Processes))
		}
		p := h.Processes[0]
		// The tick's point is the last at its time (the events' points,
		// history.After, come before it at the same time).
		last := map[uint64]uint64{}
		for _, s := range p.Samples {
			last[s.Time] = s.LiveBytes
		}
		var got, want []uint64
		for s := uint64(1); s <= uint64(tc.ticks); s++ {
			got = append(got, start+s*1e9, last[start+s*1e9])
			want = append(want, start+s*1e9, min(s, 3)*1000)
		}
		if !slices.Equal(got, want) {
			t.Errorf("--at %q: samples (time, live) %v, want %v", tc.at, got, want)
		}
		if len(p.Marks) != tc.marks || (tc.marks > 0 && p.Marks[0] != (history.Mark{Time: start + 5e9, Label: "five", Turnover: 7000})) {
			t.Errorf("--at %q: marks %v, want %d (five at 5 s, 7000 bytes turned over)", tc.at, p.Marks, tc.marks)
		}
		if rp.endNS != tc.end {
			t.Errorf("--at %q: end %d, want %d", tc.at, rp.endNS, tc.end)
		}
	}
}
