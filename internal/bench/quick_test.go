package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuick runs membench's --quick mode: every section, small sizes, one
// round. It checks that each measurement ran and is plausible, not how
// fast anything is (the machine is shared). Without root and BPF it skips,
// except under CI=true, where a skip would hide a broken pipeline.
func TestQuick(t *testing.T) {
	why := bpfUnavailable()
	if why == "" && tool("gcc") == "" {
		why = "gcc is not installed"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s: the benchmark smoke test must run in CI", why)
		}
		t.Skip(why)
	}
	// It took 4 minutes on a quiet machine whose uprobe traps cost 5 µs.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := Run(ctx, QuickConfig(), &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	if err := res.WriteJSON(filepath.Join(t.TempDir(), "results", "quick.json")); err != nil {
		t.Fatal(err)
	}

	byID := map[string]*Comparison{}
	for _, c := range res.Comparisons {
		byID[c.ID] = c
		for _, n := range c.Notes {
			if strings.HasPrefix(n, "failed:") {
				t.Errorf("%s: %s", c.ID, n)
			}
		}
		for _, r := range c.Rows {
			// Host-wide tracing by a concurrent test leaves int3 in every
			// process's malloc, which kills valgrind: not this code's fault.
			if r.Status == StatusFailed && !strings.Contains(r.Note, "another tracer had uprobes") {
				t.Errorf("%s / %s failed: %s", c.ID, r.Name, r.Note)
			}
		}
	}
	// The rows that need only root, BPF and gcc must have run.
	must := map[string][]string{
		"micro-1t":      {rowUntraced, rowFloor, rowNaive, memtraceModes[0].name},
		"micro-2t":      {rowUntraced, rowFloor, memtraceModes[0].name},
		"micro-8t":      {rowUntraced, rowFloor, memtraceModes[0].name},
		"startup":       {"memtrace -p"},
		"consumer":      {consumerRows[0].name, consumerRows[1].name, consumerRows[2].name},
		"livemem":       {"1M live blocks"},
		"blocks":        {rowUntraced, memtraceModes[0].name},
		"blocks-memory": {memtraceModes[0].name},
		// memtrace's own memory and the leak check's speed (heapscale.go).
		"heapscale-rss":       {"hold, memtrace", "/bin/true, memtrace"},
		"heapscale-leakcheck": {"memtrace (wall)", "memtrace (cpu)"},
		"heapscale-go":        {"live path: Go heap per live block (B)", "leak check: ns per block"},
		// The whole host's default against untraced (resident.go).
		"resident-faults": {rowUntraced, rowHostDefault},
		// memtrace's CPU per process start on a whole host (hoststart.go).
		"hoststart": {"/bin/true (default)", "/bin/true (--heap)"},
		// --access (access.go).
		"access-epoch":    {"256MiB heap"},
		"access-slowdown": {rowUntraced, "memtrace --access=1s"},
	}
	for id, names := range must {
		c := byID[id]
		if c == nil {
			t.Errorf("no %s table", id)
			continue
		}
		for _, n := range names {
			if r := c.row(n); r == nil || r.Status != StatusOK || r.Median <= 0 {
				t.Errorf("%s / %s: did not measure: %+v", id, n, r)
			}
		}
	}
	if c := byID["micro-1t"]; c != nil {
		base, floor, mt := c.row(rowUntraced), c.row(rowFloor), c.row(memtraceModes[0].name)
		clean := base != nil && floor != nil && !base.Contaminated && !floor.Contaminated
		if clean && floor.Median <= base.Median {
			t.Errorf("empty probes (%.1f ns/pair) cost nothing over untraced (%.1f): were they attached?", floor.Median, base.Median)
		}
		if mt != nil && (len(mt.Lost) != 1 || mt.Lost[0] != 0) {
			t.Errorf("memtrace lost events on one thread: %v", mt.Lost)
		}
		// The kernel's count of each program's runs: malloc's and free's
		// entries, and malloc's return, once per pair (and a few more at
		// start-up).
		if mt != nil {
			for name, want := range map[string]float64{"mt_alloc_entry": 2, "mt_alloc_ret": 1} {
				if p, ok := mt.BPF[name]; !ok || p.RunsPerPair < want || p.RunsPerPair > want*1.05 || p.NsPerRun <= 0 {
					t.Errorf("memtrace exact: BPF program %s: %+v, want %.0f runs per pair", name, p, want)
				}
			}
		}
	}
	if r := byID["livemem"].row("1M live blocks"); r != nil && (r.Median < 4 || r.Median > 1000) {
		t.Errorf("%.1f B per live block is implausible", r.Median)
	}
}
