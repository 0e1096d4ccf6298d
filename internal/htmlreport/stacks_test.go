package htmlreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/htmlreport/headless"
	"github.com/memtrace/memtrace/internal/pprofout"
)

// chains are the stacks of testdata/sampled_stacks.c's call site
// make_block (address 10): main -> left -> make_block and main -> right ->
// middle -> make_block, innermost first.
var chains = map[int32][]uint64{1: {10, 11, 13}, 2: {10, 12, 14, 15}, 3: {10, 16, 13}}

type chainStacks struct{ names }

func (c chainStacks) Stack(pid uint32, s aggregate.SiteSnapshot) callstack.Stack {
	var st callstack.Stack
	for _, a := range chains[s.StackID] {
		st.Frames = append(st.Frames, c.Resolve(int(pid), a))
	}
	return st
}

var chainNames = names{10: "make_block", 11: "left", 12: "middle", 13: "main", 14: "right", 15: "main", 16: "churn"}

// TestSampledStacks: a sampled run without --detail keeps one call site
// broken down by stack (aggregate's SetStackBreakdown); the flame graph
// draws each stack, with live bytes at the chosen moment (the peak) and
// bytes allocated over the run, while the timeline keeps one layer for the
// call site. The fixture's figures: left keeps 30 blocks of 8192 bytes,
// right allocates 20 of 16384 and frees 5 after the peak, and one block of
// 1024 bytes has no stack; at --sample-bytes 64 each weighs 1 to within
// rounding. A third chain, through churn, allocates 10 blocks of 4096
// bytes and frees them between two moments: the history never names it,
// the bytes allocated over the run do.
func TestSampledStacks(t *testing.T) {
	tb := aggregate.NewTable()
	tb.SetSampleBytes(64)
	tb.SetStackBreakdown(true)
	c := history.New(history.Options{})
	now := uint64(0)
	apply := func(e event.Event) {
		now += 1000
		e.PID, e.Time, e.CallSite = 1, now, 10
		tb.Apply(&e)
		c.Observe(&e)
	}
	addr := uint64(0x10000)
	alloc := func(size uint64, stack int32) uint64 {
		addr += 0x10000
		apply(event.Event{Kind: event.Alloc, Func: event.FuncMalloc, Addr: addr, Size: size, StackID: stack})
		return addr
	}
	for range 30 {
		alloc(8192, 1)
	}
	var right []uint64
	for range 20 {
		right = append(right, alloc(16384, 2))
	}
	alloc(1024, -1)
	for range 10 {
		apply(event.Event{Kind: event.Free, Func: event.FuncFree, Addr: alloc(4096, 3)})
	}
	c.Sample(1e8, tb.Snapshot(), tb) // the peak
	for _, a := range right[:5] {
		apply(event.Event{Kind: event.Free, Func: event.FuncFree, Addr: a})
	}
	final := tb.Snapshot()
	c.Sample(2e8, final, tb)

	path := t.TempDir() + "/report.html"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, c.History(), final, pprofout.Sources{Symbolizer: chainNames, Stacks: chainStacks{chainNames}}, Options{}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// Live bytes at the peak, as drawn.
	want := []string{
		"all  574464",
		"main main 573440",
		"right main;right 327680",
		"middle main;right;middle 327680",
		"make_block main;right;middle;make_block 327680",
		"left main;left 245760",
		"make_block main;left;make_block 245760",
		"make_block make_block 1024",
	}
	if frames := flameFrames(t, path); strings.Join(frames, "\n") != strings.Join(want, "\n") {
		t.Errorf("flame graph frames:\n%s\nwant\n%s", strings.Join(frames, "\n"), strings.Join(want, "\n"))
	}
	// Allocated over the run, as drawn: churn's chain too.
	want = []string{
		"all  615424",
		"main main 614400",
		"right main;right 327680",
		"middle main;right;middle 327680",
		"make_block main;right;middle;make_block 327680",
		"left main;left 245760",
		"make_block main;left;make_block 245760",
		"churn main;churn 40960",
		"make_block main;churn;make_block 40960",
		"make_block make_block 1024",
	}
	if frames := flameFrames(t, path+"#flame=allocated"); strings.Join(frames, "\n") != strings.Join(want, "\n") {
		t.Errorf("flame graph frames, allocated:\n%s\nwant\n%s", strings.Join(frames, "\n"), strings.Join(want, "\n"))
	}

	// Allocated over the run, and the live bytes of the last moment, from
	// the page's data; one group (one timeline layer) for the call site.
	p := pageProcess(t, path)
	got := map[string]string{}
	for i, s := range p.Sites {
		var fns []string
		for _, fr := range s.Stack {
			fns = append(fns, p.Frames[fr][0])
		}
		got[strings.Join(fns, ";")] = fmt.Sprintf("allocated %d in %d, live at the end %d", s.Allocated, s.Allocs, liveAt(p, len(p.Times)-1, i))
	}
	wantSites := map[string]string{
		"main;left;make_block":         "allocated 245760 in 30, live at the end 245760",
		"main;right;middle;make_block": "allocated 327680 in 20, live at the end 245760",
		"make_block":                   "allocated 1024 in 1, live at the end 1024",
		"main;churn;make_block":        "allocated 40960 in 10, live at the end 0",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantSites) {
		t.Errorf("sites:\n%v\nwant\n%v", got, wantSites)
	}
	if len(p.Groups) != 1 || p.Groups[0].Label != "make_block" {
		t.Errorf("groups %+v, want make_block alone", p.Groups)
	}

	// Past the bound on sites named for what they allocated, the rest is
	// one figure.
	defer func(n int) { allocatedSites = n }(allocatedSites)
	allocatedSites = 0
	var buf bytes.Buffer
	if err := Write(&buf, c.History(), final, pprofout.Sources{Symbolizer: chainNames, Stacks: chainStacks{chainNames}}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	frames := flameFrames(t, path+"#flame=allocated")
	if strings.Contains(buf.String(), "churn") || !slices.Contains(frames, "(smaller call sites) (smaller call sites) 40960") {
		t.Errorf("allocatedSites 0: churn's 40960 bytes not one block of their own:\n%s", strings.Join(frames, "\n"))
	}
}

// flameFrames loads a page and returns its flame graph's frames as drawn:
// name, path from the root and figure.
func flameFrames(t *testing.T, url string) []string {
	t.Helper()
	var frames []string
	for _, m := range regexp.MustCompile(`<div class="frame" data-path="([^"]*)" data-value="(\d+)"[^>]*>([^<]*)<`).FindAllStringSubmatch(headless.Load(t, url), -1) {
		frames = append(frames, m[3]+" "+m[1]+" "+m[2])
	}
	return frames
}

// pageProcess reads the first process of the data a page carries.
func pageProcess(t *testing.T, path string) processData {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`).FindSubmatch(b)
	var d pageData
	if m == nil {
		t.Fatal("no page data")
	}
	if err := json.Unmarshal(m[1], &d); err != nil || len(d.Processes) == 0 {
		t.Fatalf("page data: %v, %d processes", err, len(d.Processes))
	}
	return d.Processes[0]
}

// liveAt is site si's live bytes at sample i of the page's timeline.
func liveAt(p processData, i, si int) uint64 {
	sl := p.SiteLiv[i]
	for k := 0; k+1 < len(sl); k += 2 {
		if int(sl[k]) == si {
			return sl[k+1]
		}
	}
	return 0
}
