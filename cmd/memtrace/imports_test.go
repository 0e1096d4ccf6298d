package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestEBPFOnlyInTheLiveSource: of memtrace's packages only
// internal/tracer/ (and its test objects' packages) and the live source
// (internal/session/, and internal/host/, which finds the files to probe
// host-wide) depend on cilium/ebpf, with what links them (this command)
// and internal/bench/, which measures the kernel path. A replay, the reports and
// the aggregation build and run without it (docs/architecture.md).
func TestEBPFOnlyInTheLiveSource(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/memtrace/memtrace"
	allowed := []string{"internal/tracer", "internal/session", "internal/host", "internal/bench", "bench/cmd/membench", "cmd/memtrace"}
	var with []string
	for l := range strings.Lines(string(out)) {
		fields := strings.Fields(l)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "/")
		if slices.Contains(fields[1:], "github.com/cilium/ebpf") {
			with = append(with, pkg)
			if !slices.Contains(allowed, pkg) && !strings.HasPrefix(pkg, "internal/tracer/") {
				t.Errorf("%s depends on github.com/cilium/ebpf", pkg)
			}
		}
	}
	for _, pkg := range []string{"replay", "pipeline", "aggregate", "report", "recording", "symbolize", "leakcheck", "residency"} {
		if slices.Contains(with, "internal/"+pkg) {
			t.Errorf("%s depends on github.com/cilium/ebpf", pkg)
		}
	}
}
