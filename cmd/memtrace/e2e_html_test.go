package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

// TestHTML: --html on testdata/exports_phases.c gives a page that headless
// chromium draws without errors, whose timeline peaks at the peak the
// JSON reports (the fixture holds its peak for 600 ms, six samples).
func TestHTML(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "exports_phases.c")
	page := filepath.Join(t.TempDir(), "report.html")
	r := runMemtrace(t, "--json", "--html", page, "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	peak := parseNDJSON(t, r.stdout).finalProcess(t).PeakLiveBytes
	if peak != 3000000 {
		t.Errorf("JSON peak %d, want 3000000", peak)
	}
	dom := headless.Load(t, page)
	checkPage(t, dom, peak, nil) // e2e_replay_exports_test.go
	if !strings.Contains(dom, `id="peak-label"`) {
		t.Errorf("peak not labelled")
	}
}

// TestHTMLSampledStacks: sampled mode without --detail draws whole stacks
// in the page's flame graph, from each call site's per-stack breakdown.
// testdata/sampled_stacks.c reaches make_block's call site by two chains;
// at --sample-bytes 64 every block weighs exactly 1, so the figures are
// the true ones. The live run's page: bytes allocated over the run per
// chain, as drawn and in the page's data, and each chain's live bytes at
// the end; replaying the run's recording --at peak: the flame graph as
// drawn at the peak (before right frees 5 blocks), and allocated as of
// then.
func TestHTMLSampledStacks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "sampled_stacks.c")
	dir := t.TempDir()
	page, rec := filepath.Join(dir, "live.html"), filepath.Join(dir, "run.rec")
	if r := runMemtrace(t, "--sample-bytes", "64", "--html", page, "--record", rec, "--", bin); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got, w := chainFrames(t, page+"#flame=allocated"), "main;right;middle;make_block 327680, main;left;make_block 245760"; got != w {
		t.Errorf("flame graph of bytes allocated: %s, want %s", got, w)
	}
	want := map[string]string{
		"main;left;make_block":         "allocated 245760 in 30, live at the last moment 245760",
		"main;right;middle;make_block": "allocated 327680 in 20, live at the last moment 245760",
	}
	if got := chainFigures(t, page); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("live run's page, make_block's stacks:\n%v\nwant\n%v", got, want)
	}

	atPeak := filepath.Join(dir, "peak.html")
	if r := runMemtrace(t, "replay", rec, "--at", "peak", "--html", atPeak); r.code != 0 {
		t.Fatalf("replay: exit %d: %s", r.code, r.stderr)
	}
	if got, w := chainFrames(t, atPeak), "main;right;middle;make_block 327680, main;left;make_block 245760"; got != w {
		t.Errorf("flame graph at the peak: %s, want %s", got, w)
	}
	want = map[string]string{
		"main;left;make_block":         "allocated 245760 in 30, live at the last moment 245760",
		"main;right;middle;make_block": "allocated 327680 in 20, live at the last moment 327680",
	}
	if got := chainFigures(t, atPeak); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replay --at peak's page, make_block's stacks:\n%v\nwant\n%v", got, want)
	}
}

// chainFrames loads a page and returns the frames of make_block its flame
// graph draws, each with its path from the root and its figure.
func chainFrames(t *testing.T, url string) string {
	t.Helper()
	var frames []string
	for _, m := range regexp.MustCompile(`<div class="frame" data-path="([^"]*make_block)" data-value="(\d+)"`).FindAllStringSubmatch(headless.Load(t, url), -1) {
		frames = append(frames, m[1]+" "+m[2])
	}
	return strings.Join(frames, ", ")
}

// chainFigures reads make_block's stacks from a page's data: per stack
// (functions, outermost first, ";" between), the bytes and blocks
// allocated and the live bytes at the page's last moment (the end, or --at).
func chainFigures(t *testing.T, page string) map[string]string {
	t.Helper()
	var d struct {
		Processes []struct {
			Sites []struct {
				Stack     []int  `json:"stack"`
				Allocated uint64 `json:"allocated"`
				Allocs    uint64 `json:"allocs"`
			} `json:"sites"`
			Frames   [][2]string `json:"frames"`
			SiteLive [][]uint64  `json:"siteLive"`
		} `json:"processes"`
	}
	if readPageData(t, page, &d); len(d.Processes) != 1 {
		t.Fatalf("page data: %d processes", len(d.Processes))
	}
	p := d.Processes[0]
	live := map[uint64]uint64{}
	if n := len(p.SiteLive); n > 0 {
		for k := 0; k+1 < len(p.SiteLive[n-1]); k += 2 {
			live[p.SiteLive[n-1][k]] = p.SiteLive[n-1][k+1]
		}
	}
	out := map[string]string{}
	for i, s := range p.Sites {
		var fns []string
		for _, f := range s.Stack {
			fns = append(fns, p.Frames[f][0])
		}
		if len(fns) < 2 || fns[len(fns)-1] != "make_block" {
			continue // the call site alone: the heap map's key for its blocks
		}
		out[strings.Join(fns, ";")] = fmt.Sprintf("allocated %d in %d, live at the last moment %d", s.Allocated, s.Allocs, live[uint64(i)])
	}
	return out
}

// readPageData decodes the data an --html page draws (its #data element)
// into v.
func readPageData(t *testing.T, page string, v any) {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no page data", page)
	}
	if err := json.Unmarshal(m[1], v); err != nil {
		t.Fatalf("%s: page data: %v", page, err)
	}
}
