package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOwnMemoryReported: a live run tells memtrace's own resident memory
// in the report line and, with -v, in its log (docs/memory.md). Its size
// is the benchmarks' business (make bench, section heapscale).
func TestOwnMemoryReported(t *testing.T) {
	needBPF(t)
	r := runMemtrace(t, "-v", "--json", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var rep struct {
		Type    string `json:"type"`
		Final   bool   `json:"final"`
		PeakRSS uint64 `json:"memtrace_peak_rss_bytes"`
		RSS     uint64 `json:"memtrace_rss_bytes"`
	}
	found := false
	for l := range strings.Lines(r.stdout) {
		if !strings.HasPrefix(l, `{"type":"report"`) {
			continue
		}
		if err := json.Unmarshal([]byte(l), &rep); err != nil {
			t.Fatal(err)
		}
		found = rep.Final
	}
	if !found {
		t.Fatalf("no final report line:\n%s", r.stdout)
	}
	if rep.RSS == 0 || rep.PeakRSS < rep.RSS {
		t.Errorf("report: memtrace_peak_rss_bytes %d, memtrace_rss_bytes %d: want 0 < rss <= peak", rep.PeakRSS, rep.RSS)
	}
	for _, want := range []string{`msg="memtrace memory" peak_rss_bytes=`, `msg="go memory limit" floor_bytes=`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("-v log lacks %s:\n%s", want, r.stderr)
		}
	}
	// A user's GOMEMLIMIT is left alone.
	t.Setenv("GOMEMLIMIT", "1GiB")
	r = runMemtrace(t, "-v", "--", "true")
	if !strings.Contains(r.stderr, `msg="go memory limit: GOMEMLIMIT rules"`) {
		t.Errorf("with GOMEMLIMIT set, -v log lacks that it rules:\n%s", r.stderr)
	}
}
