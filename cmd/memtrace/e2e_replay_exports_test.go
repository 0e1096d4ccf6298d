package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

// TestReplayExports: replay --pprof and --folded write what the live run
// wrote (the same figures per function, the same stacks), and replay
// --html a page drawn by headless chromium whose timeline peaks at the
// fixture's peak.
func TestReplayExports(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "exports_phases.c")
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	rec := file("run.rec")
	live := runMemtrace(t, "--record", rec, "--pprof", file("live.pb.gz"),
		"--folded", file("live.folded"), "--folded-value", "allocated", "--", bin)
	if live.code != 0 {
		t.Fatalf("live: exit %d\n%s", live.code, live.stderr)
	}
	r := runMemtrace(t, "replay", "--pprof", file("replay.pb.gz"), "--folded", file("replay.folded"),
		"--folded-value", "allocated", "--html", file("replay.html"), rec)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}

	want, got := pprofFigures(t, file("live.pb.gz")), pprofFigures(t, file("replay.pb.gz"))
	for fn, w := range phaseFigures {
		if want[fn] != w {
			t.Errorf("live %s: %v, want %v", fn, want[fn], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("replay has %d functions, live %d: %v, %v", len(got), len(want), got, want)
	}
	for fn, w := range want {
		if got[fn] != w {
			t.Errorf("replay %s: %v, live %v", fn, got[fn], w)
		}
	}

	lf, _ := os.ReadFile(file("live.folded"))
	rf, err := os.ReadFile(file("replay.folded"))
	if err != nil || string(rf) != string(lf) || !strings.Contains(string(rf), "spike 2000000") {
		t.Errorf("replay --folded (%v):\n%s\nlive:\n%s", err, rf, lf)
	}

	dom := headless.Load(t, file("replay.html"))
	checkPage(t, dom, 3000000, nil)
}

// TestReplayExportsAt: replay --at mark:peak writes the files as of that
// mark: the two held phases live, what came after absent; the page's
// timeline ends there, with the marks so far.
func TestReplayExportsAt(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "phases.c")
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.rec")
	if live := runMemtrace(t, "--record", rec, "--mark", "memtrace_mark", "--", bin); live.code != 0 {
		t.Fatalf("live: exit %d\n%s", live.code, live.stderr)
	}
	prof, page := filepath.Join(dir, "peak.pb.gz"), filepath.Join(dir, "peak.html")
	if r := runMemtrace(t, "replay", "--at", "mark:peak", "--pprof", prof, "--html", page, rec); r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	got := pprofFigures(t, prof)
	for fn, w := range map[string][4]int64{
		"take_and_free": {120, 30 * mib, 0, 0},
		"hold_a":        {80, 20 * mib, 80, 20 * mib},
		"hold_b":        {60, 15 * mib, 60, 15 * mib},
		"keep":          {},
	} {
		if got[fn] != w {
			t.Errorf("--at mark:peak: %s %v, want %v", fn, got[fn], w)
		}
	}
	checkPage(t, headless.Load(t, page), 35*mib, []string{"churn", "peak"})
}

// checkPage checks that each section of the page is drawn, that the
// timeline's maximum and peak are peak, and (when marks is not nil) the
// mark labels drawn.
func checkPage(t *testing.T, dom string, peak uint64, marks []string) {
	t.Helper()
	for _, id := range []string{"timeline", "rates", "flame", "heapmap", "sizes"} {
		if !regexp.MustCompile(`<section id="` + id + `"[^>]*data-drawn="1"`).MatchString(dom) {
			t.Errorf("section %s not drawn", id)
		}
	}
	m := regexp.MustCompile(`data-max="(\d+)" data-peak="(\d+)"`).FindStringSubmatch(dom)
	want := strconv.FormatUint(peak, 10)
	if m == nil || m[1] != want || m[2] != want {
		t.Errorf("timeline max, peak = %v, want %s", m, want)
	}
	if marks == nil {
		return
	}
	var labels []string
	for _, l := range regexp.MustCompile(`class="mark-label"[^>]*>([^<]*)<`).FindAllStringSubmatch(dom, -1) {
		labels = append(labels, l[1])
	}
	if strings.Join(labels, " ") != strings.Join(marks, " ") {
		t.Errorf("mark labels %q, want %q", labels, marks)
	}
}

// pprofFigures reads a --pprof file: per function, allocations, bytes
// allocated, live blocks and live bytes.
func pprofFigures(t *testing.T, path string) map[string][4]int64 {
	t.Helper()
	figures := map[string][4]int64{}
	for _, s := range readProfile(t, path).Sample {
		fn := "?"
		if l := s.Location[0]; len(l.Line) > 0 {
			fn = l.Line[0].Function.Name
		}
		v := figures[fn]
		for i := range v {
			v[i] += s.Value[i]
		}
		figures[fn] = v
	}
	return figures
}

// readProfile parses a --pprof file.
func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}
