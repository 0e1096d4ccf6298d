package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/pprofout"
)

// TestFootprintMetrics: a process with a reading gets its RSS by kind, its
// breakdown by part (a Go program's heap and runtime among them), its mappings by state and its cgroup's memory.
func TestFootprintMetrics(t *testing.T) {
	s := New(Options{Sources: pprofout.Sources{Symbolizer: names{}}})
	p := aggregate.ProcessSnapshot{PID: 10, Comm: "prog", Heap: aggregate.Stats{LiveBytes: 100}}
	p.SetFootprint(footprint.Reading{RSS: 1000, RSSAnon: 700, RSSFile: 250, RSSShmem: 50, HeapResident: 400,
		AnonResident: 200, StackResident: 30, FileResident: 300, Unexplained: 70, CgroupMemory: 5000,
		GoHeap: footprint.State{Resident: 60}, GoHeapSource: footprint.GoHeapFromRuntime, GoRuntimeResident: 9})
	p.MappedState = footprint.State{Reserved: 800, Committed: 300, Resident: 200}
	s.Update(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{p}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	var got []string
	for _, l := range strings.Split(string(get(t, srv, "/metrics")), "\n") {
		for _, m := range []string{"memtrace_rss_bytes", "memtrace_resident_bytes", "memtrace_mmap_bytes", "memtrace_cgroup_memory_bytes"} {
			if strings.HasPrefix(l, m+"{") {
				got = append(got, l)
			}
		}
	}
	lv := `cgroup="",comm="prog"`
	want := []string{
		`memtrace_cgroup_memory_bytes{` + lv + `,pid="10"} 5000`,
		`memtrace_mmap_bytes{` + lv + `,pid="10",state="committed"} 300`,
		`memtrace_mmap_bytes{` + lv + `,pid="10",state="reserved"} 800`,
		`memtrace_mmap_bytes{` + lv + `,pid="10",state="resident"} 200`,
		`memtrace_resident_bytes{` + lv + `,part="files",pid="10"} 300`,
		`memtrace_resident_bytes{` + lv + `,part="go_heap",pid="10"} 60`,
		`memtrace_resident_bytes{` + lv + `,part="go_runtime",pid="10"} 9`,
		`memtrace_resident_bytes{` + lv + `,part="heap_live",pid="10"} 100`,
		`memtrace_resident_bytes{` + lv + `,part="heap_retained",pid="10"} 300`,
		`memtrace_resident_bytes{` + lv + `,part="mmap",pid="10"} 200`,
		`memtrace_resident_bytes{` + lv + `,part="stacks",pid="10"} 30`,
		`memtrace_resident_bytes{` + lv + `,part="unexplained",pid="10"} 70`,
		`memtrace_rss_bytes{` + lv + `,kind="anon",pid="10"} 700`,
		`memtrace_rss_bytes{` + lv + `,kind="file",pid="10"} 250`,
		`memtrace_rss_bytes{` + lv + `,kind="shmem",pid="10"} 50`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
