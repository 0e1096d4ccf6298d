package main

import (
	"strings"
	"testing"
	"time"
)

// TestBeforeTables: the command does not wait for its unwind tables
// (--tables-wait 0): node's start-up allocations come while its 98 MB
// binary's table is still being built (--no-cache), and are charged all
// the same, to the frame in node, marked before_table; the run ends as
// any other.
func TestBeforeTables(t *testing.T) {
	needBPF(t)
	needTools(t, "node")
	r := runMemtrace(t, "--json", "--top", "0", "--no-cache", "--tables-wait", "0", "--", "node", "-e", "0")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rep := parseNDJSON(t, r.stdout)
	p := rep.finalProcess(t)
	var before, inNode int
	for _, s := range rep.sites {
		if !s.BeforeTable || s.PID != p.PID {
			continue
		}
		before++
		if strings.HasSuffix(s.Module, "/node") {
			inNode++
		}
		if s.Allocs == 0 && s.Category == "heap" {
			t.Errorf("a site marked before_table with no allocations: %+v", s)
		}
	}
	if before == 0 || inNode == 0 {
		t.Errorf("%d sites before_table, %d of them in node; want some in node (its table takes far longer than its first allocations)", before, inNode)
	}
}

// TestDurationFromTracing: -d counts from the moment the command's probes
// are attached, not from memtrace's start: the command runs for -d after
// the probes are in.
func TestDurationFromTracing(t *testing.T) {
	needBPF(t)
	start := time.Now()
	r := runMemtrace(t, "-v", "--json", "-d", "1s", "--", "sleep", "30")
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("-d 1s took %v", took)
	}
	attached := strings.Index(r.stderr, "msg=attached")
	tracing := strings.Index(r.stderr, "msg=tracing for=1s")
	if attached < 0 || tracing < attached {
		t.Errorf("the deadline did not start after the probes were attached (attached at %d, tracing at %d):\n%s", attached, tracing, r.stderr)
	}
	if p := parseNDJSON(t, r.stdout).finalProcess(t); !p.Exited {
		t.Errorf("sleep 30 not ended by -d 1s: %+v", p)
	}
}
