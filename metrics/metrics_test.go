package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/pprofout"
	"github.com/memtrace/memtrace/symbolize"
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
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
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

	resp, err = srv.Client().Get(srv.URL + "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 4 {
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
