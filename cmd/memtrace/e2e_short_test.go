package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

// shortPage is what TestHTMLShortRun reads of a page's data: a process's
// pictures, times left out but for the marks'.
type shortPage struct {
	Axis   string    `json:"axis"`
	X      []uint64  `json:"x"`
	T      []float64 `json:"t"`
	Live   []uint64  `json:"live"`
	Blocks []uint64  `json:"blocks"`
	Marks  []struct {
		Label string  `json:"label"`
		X     uint64  `json:"x"`
		T     float64 `json:"t"`
	} `json:"marks"`
	Maps []struct {
		X    uint64  `json:"x"`
		Why  string  `json:"why"`
		Runs []int64 `json:"runs"`
	} `json:"maps"`
	Peak struct {
		X     uint64 `json:"x"`
		Bytes uint64 `json:"bytes"`
	} `json:"peak"`
}

func readShortPage(t *testing.T, path string) shortPage {
	t.Helper()
	var d struct{ Processes []shortPage }
	if readPageData(t, path, &d); len(d.Processes) != 1 {
		t.Fatalf("%s: page data: %d processes", path, len(d.Processes))
	}
	return d.Processes[0]
}

// TestHTMLShortRun: testdata/phases.c runs for a few milliseconds (30 MiB
// allocated and freed, 35 MiB held at the peak, released, 32 MiB kept,
// a mark after each phase). Its page is drawn against the heap bytes
// turned over: a timeline of many points, the marks at their exact
// turnover, in rows that do not overlap, the peak's, the marks' and the
// end's heap-map moments; the rates panel says why it has no curve. The
// marks' times are distinct and in order. Replaying the run's recording
// draws the same pictures.
func TestHTMLShortRun(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "phases.c")
	dir := t.TempDir()
	page, rec, again := filepath.Join(dir, "live.html"), filepath.Join(dir, "run.rec"), filepath.Join(dir, "replay.html")
	if r := runMemtrace(t, "--mark", "memtrace_mark", "--record", rec, "--html", page, "--", bin); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	const mib = 1 << 20
	p := readShortPage(t, page)
	if p.Axis != "bytes" {
		t.Errorf("axis %q, want bytes (a run of %v s)", p.Axis, p.T[len(p.T)-1])
	}
	if len(p.X) < 100 {
		t.Errorf("%d timeline points, want at least 100", len(p.X))
	}
	var marks []string
	for i, m := range p.Marks {
		marks = append(marks, fmt.Sprintf("%s@%dMiB", m.Label, m.X/mib))
		if i > 0 && m.T <= p.Marks[i-1].T {
			t.Errorf("mark %s at %v s, not after %s at %v s", m.Label, m.T, p.Marks[i-1].Label, p.Marks[i-1].T)
		}
	}
	if got, want := strings.Join(marks, " "), "churn@60MiB peak@95MiB released@130MiB kept@162MiB"; got != want {
		t.Errorf("marks %s, want %s", got, want)
	}
	if p.Peak.X != 95*mib || p.Peak.Bytes != 35*mib {
		t.Errorf("peak %d bytes after %d turned over, want %d after %d", p.Peak.Bytes, p.Peak.X, 35*mib, 95*mib)
	}
	var moments []string
	for _, m := range p.Maps {
		if m.Why != "" { // periodic moments depend on when the ticks fell
			moments = append(moments, fmt.Sprintf("%s@%dMiB", m.Why, m.X/mib))
		}
	}
	if got, want := strings.Join(moments, " "), "mark@60MiB mark, peak@95MiB mark@130MiB mark, end@162MiB"; got != want {
		t.Errorf("heap-map moments %s, want %s", got, want)
	}
	if n := len(p.Maps); n < 5 || p.Maps[0].X != mib/4 {
		t.Errorf("%d heap-map moments, the first after %d bytes; want 5 or more, the first at the first block (%d)", n, p.Maps[0].X, mib/4)
	}

	dom := headless.Load(t, page)
	checkPage(t, dom, 35*mib, []string{"churn", "peak", "released", "kept"})
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`data-mark-overlaps="0" data-points="` + fmt.Sprint(len(p.X)) + `"`),
		regexp.MustCompile(`<div class="chart" data-short="1">This process was traced for [0-9.]+ ms`),
		regexp.MustCompile(`id="map-time">t=[0-9.]+ ms after 95 MiB turned over \(mark, peak\) \[\d+/` + fmt.Sprint(len(p.Maps)) + `\]<`),
	} {
		if !want.MatchString(dom) {
			t.Errorf("page lacks %s", want)
		}
	}

	if r := runMemtrace(t, "replay", "--html", again, rec); r.code != 0 {
		t.Fatalf("replay: exit %d: %s", r.code, r.stderr)
	}
	q := readShortPage(t, again)
	p.T, q.T = nil, nil // the end's time: when the run ended, when its last record was
	if !reflect.DeepEqual(p, q) {
		t.Errorf("replay's pictures differ from the live run's:\nlive   %+v\nreplay %+v", brief(p), brief(q))
	}
}

// brief is a page's data short enough for a test failure.
func brief(p shortPage) string {
	return fmt.Sprintf("axis %s, %d points (last x %d), marks %v, %d maps, peak %v", p.Axis, len(p.X), slices.Max(p.X), p.Marks, len(p.Maps), p.Peak)
}
