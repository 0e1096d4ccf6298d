package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/htmlreport/headless"
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
