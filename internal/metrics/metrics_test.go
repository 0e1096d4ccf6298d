package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/symbolize"
)

type names map[uint64]string

func (n names) Resolve(pid int, ret uint64) symbolize.Frame {
	return symbolize.Frame{Address: ret, Function: n[ret], Module: "/bin/prog"}
}

func heapSite(addr, live uint64) aggregate.SiteSnapshot {
	return aggregate.SiteSnapshot{Address: addr, StackID: -1, Stats: aggregate.Stats{Allocs: 1, AllocBytes: live, LiveAllocs: 1, LiveBytes: live}}
}

// TestMetrics: the per-process series; call sites summed per (function,
// module) and cut to Top; a process that exited leaves the output.
func TestMetrics(t *testing.T) {
	s := New(Options{Top: 2, Sources: pprofout.Sources{Symbolizer: names{1: "a", 2: "a", 3: "b", 4: "c"}},
		Cgroup: func(pid uint32) string { return "/box" }})
	s.Update(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{
		{PID: 10, Comm: "prog", Heap: aggregate.Stats{Allocs: 4, AllocBytes: 100, LiveAllocs: 4, LiveBytes: 100}, PeakLiveBytes: 150,
			Sites: []aggregate.SiteSnapshot{heapSite(1, 30), heapSite(2, 25), heapSite(3, 40), heapSite(4, 5)}},
		{PID: 11, Comm: "gone", Exited: true, Heap: aggregate.Stats{LiveBytes: 7}},
	}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	b := get(t, srv, "/metrics")
	var got []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "memtrace_") {
			got = append(got, l)
		}
	}
	lv := `cgroup="/box",comm="prog"`
	want := []string{
		`memtrace_allocated_bytes_total{` + lv + `,pid="10"} 100`,
		`memtrace_allocations_total{` + lv + `,pid="10"} 4`,
		`memtrace_callsite_live_bytes{` + lv + `,function="a",module="prog",pid="10"} 55`,
		`memtrace_callsite_live_bytes{` + lv + `,function="b",module="prog",pid="10"} 40`,
		`memtrace_freed_bytes_total{` + lv + `,pid="10"} 0`,
		`memtrace_frees_total{` + lv + `,pid="10"} 0`,
		`memtrace_live_blocks{` + lv + `,pid="10"} 4`,
		`memtrace_live_bytes{` + lv + `,pid="10"} 100`,
		`memtrace_lost_events_total{` + lv + `,pid="10"} 0`,
		`memtrace_peak_live_bytes{` + lv + `,pid="10"} 150`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if p := heapProfile(t, srv); len(p.Sample) != 4 {
		t.Errorf("/debug/pprof/heap: %d samples, want 4", len(p.Sample))
	}
}

// TestListen: loopback addresses are accepted; others need public.
func TestListen(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
		err    error
	}{
		{"127.0.0.1:0", false, nil},
		{"[::1]:0", false, nil},
		{"localhost:0", false, nil},
		{":0", false, ErrNotLoopback},
		{"0.0.0.0:0", false, ErrNotLoopback},
		{":0", true, nil},
	}
	for _, tt := range tests {
		l, err := Listen(tt.addr, tt.public)
		if !errors.Is(err, tt.err) {
			t.Errorf("Listen(%q, %v) = %v, want %v", tt.addr, tt.public, err, tt.err)
		}
		if l != nil {
			l.Close()
		}
	}
}

type stacks map[int32][]symbolize.Frame

func (s stacks) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	return callstack.Stack{Frames: s[site.StackID]}
}

// TestHeapProfileStacks: a site broken down by stack (sampled mode) is one
// call-site series in /metrics and one sample per stack, whole, in
// /debug/pprof/heap.
func TestHeapProfileStacks(t *testing.T) {
	frame := func(addr uint64, fn string) symbolize.Frame {
		return symbolize.Frame{Address: addr, Function: fn, Module: "/bin/prog"}
	}
	site := heapSite(1, 30)
	site.Stacks = []aggregate.StackShare{
		{StackID: 4, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 20, LiveAllocs: 1, LiveBytes: 20}},
		{StackID: 5, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 10, LiveAllocs: 1, LiveBytes: 10}},
	}
	site.Allocs, site.LiveAllocs = 2, 2
	s := New(Options{Top: 5, Sources: pprofout.Sources{Symbolizer: names{1: "a"},
		Stacks: stacks{4: {frame(1, "a"), frame(7, "left"), frame(9, "main")}, 5: {frame(1, "a"), frame(8, "right"), frame(9, "main")}}}})
	s.Update(aggregate.Snapshot{SampleBytes: 64, Processes: []aggregate.ProcessSnapshot{
		{PID: 10, Comm: "prog", Heap: site.Stats, Sites: []aggregate.SiteSnapshot{site}},
	}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	b := get(t, srv, "/metrics")
	if n := strings.Count(string(b), "\nmemtrace_callsite_live_bytes{"); n != 1 || !strings.Contains(string(b), `function="a",module="prog",pid="10"} 30`) {
		t.Errorf("want one call-site series of 30 bytes, got %d:\n%s", n, b)
	}
	var got []string
	for _, sm := range heapProfile(t, srv).Sample {
		var fns []string
		for _, l := range sm.Location {
			fns = append(fns, l.Line[0].Function.Name)
		}
		got = append(got, strings.Join(fns, "/")+" "+strconv.FormatInt(sm.Value[3], 10))
	}
	if want := "a/left/main 20, a/right/main 10"; strings.Join(got, ", ") != want {
		t.Errorf("/debug/pprof/heap samples %q, want %q", strings.Join(got, ", "), want)
	}
}

func get(t *testing.T, srv *httptest.Server, path string) []byte {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func heapProfile(t *testing.T, srv *httptest.Server) *profile.Profile {
	t.Helper()
	p, err := profile.ParseData(get(t, srv, "/debug/pprof/heap"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResidentMetrics: a process with resident figures has its total, its
// standard error and its top sites by (function, module).
func TestResidentMetrics(t *testing.T) {
	s := New(Options{Top: 2, Sources: pprofout.Sources{Symbolizer: names{1: "a", 2: "a", 3: "b", 4: "c"}},
		Cgroup: func(pid uint32) string { return "/box" }})
	s.Update(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 10, Comm: "go",
		Resident: &aggregate.ResidentSnapshot{SampleBytes: 65536, Pages: 9, Bytes: 900, Stderr: 30, Sites: []aggregate.ResidentSite{
			{Address: 1, Bytes: 300}, {Address: 2, Bytes: 200}, {Address: 3, Bytes: 350}, {Address: 4, Bytes: 50}}}}}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	var got []string
	for _, l := range strings.Split(string(get(t, srv, "/metrics")), "\n") {
		if strings.Contains(l, "resident") && !strings.HasPrefix(l, "#") {
			got = append(got, l)
		}
	}
	lv := `cgroup="/box",comm="go"`
	want := []string{
		`memtrace_callsite_resident_bytes{` + lv + `,function="a",module="prog",pid="10"} 500`,
		`memtrace_callsite_resident_bytes{` + lv + `,function="b",module="prog",pid="10"} 350`,
		`memtrace_resident_estimate_bytes{` + lv + `,pid="10"} 900`,
		`memtrace_resident_estimate_bytes_stderr{` + lv + `,pid="10"} 30`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHostileLabels: a comm, cgroup or function name with invalid UTF-8
// or controls is served escaped: the scrape succeeds (client_golang
// refuses invalid UTF-8 label values, and memtrace panicked on them).
func TestHostileLabels(t *testing.T) {
	s := New(Options{Top: 2, Sources: pprofout.Sources{Symbolizer: names{1: "f\xff\n\x1b[2J"}},
		Cgroup: func(pid uint32) string { return "/box\xfe" }})
	s.Update(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{
		{PID: 10, Comm: "\x1b]0;x\x07\xc3", Heap: aggregate.Stats{Allocs: 1, AllocBytes: 30, LiveAllocs: 1, LiveBytes: 30},
			Sites: []aggregate.SiteSnapshot{heapSite(1, 30)}},
	}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	b := get(t, srv, "/metrics")
	want := `memtrace_callsite_live_bytes{cgroup="/box\\xfe",comm="\\x1b]0;x\\x07\\xc3",function="f\\xff\\n\\x1b[2J",module="prog",pid="10"} 30`
	if !strings.Contains(string(b), want+"\n") {
		t.Errorf("no line\n%s\nin:\n%s", want, b)
	}
}
