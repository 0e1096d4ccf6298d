package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/pprofout"
)

// TestAccessMetrics: a process's latest access epoch as gauges by state,
// its sites summed per (function, module) and cut to Top; written is
// absent when the kernel cannot tell it.
func TestAccessMetrics(t *testing.T) {
	s := New(Options{Top: 1, Sources: pprofout.Sources{Symbolizer: names{1: "a", 2: "a", 3: "b"}}})
	s.Update(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 10, Comm: "prog"}}})
	site := func(addr, live, touched uint64) access.SiteFigures {
		return access.SiteFigures{Site: aggregate.SiteKey{Address: addr, StackID: -1}, Figures: access.Figures{Live: live, Touched: touched, Cold: live - touched}}
	}
	e := access.Epoch{Process: access.Figures{Live: 100, Touched: 30, Cold: 60, NeverTouched: 10},
		Sites: []access.SiteFigures{site(1, 30, 10), site(2, 30, 20), site(3, 40, 0)}}
	s.UpdateAccess(10, e)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	var got []string
	for _, l := range strings.Split(string(get(t, srv, "/metrics")), "\n") {
		if strings.HasPrefix(l, "memtrace_access") || strings.HasPrefix(l, "memtrace_callsite_access") {
			got = append(got, l)
		}
	}
	lv := `cgroup="",comm="prog"`
	want := []string{
		`memtrace_access_bytes{` + lv + `,pid="10",state="cold"} 60`,
		`memtrace_access_bytes{` + lv + `,pid="10",state="live"} 100`,
		`memtrace_access_bytes{` + lv + `,pid="10",state="never_touched"} 10`,
		`memtrace_access_bytes{` + lv + `,pid="10",state="touched"} 30`,
		`memtrace_callsite_access_bytes{` + lv + `,function="a",module="prog",pid="10",state="cold"} 30`,
		`memtrace_callsite_access_bytes{` + lv + `,function="a",module="prog",pid="10",state="live"} 60`,
		`memtrace_callsite_access_bytes{` + lv + `,function="a",module="prog",pid="10",state="never_touched"} 0`,
		`memtrace_callsite_access_bytes{` + lv + `,function="a",module="prog",pid="10",state="touched"} 30`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The process gone, its series go.
	s.Update(aggregate.Snapshot{})
	if b := get(t, srv, "/metrics"); strings.Contains(string(b), "memtrace_access_bytes{") {
		t.Errorf("an exited process's access series stay:\n%s", b)
	}
}
