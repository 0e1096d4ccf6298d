package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/memtrace/memtrace/htmlreport/headless"
)

// TestHTMLTimeline: the --html page of testdata/html_phases.c, a short run
// (drawn against bytes turned over) and a long one (against time), each
// loaded at 1400 px and photographed ($MEMTRACE_SHOTS keeps the PNGs).
// The heap-resident line has no point before the first footprint reading
// and none at 0 B while the heap holds its 25 MiB; once the fixture has
// freed half and a second has passed, it follows; the page does not
// overflow; the flame graph says why it is one row without --detail, and
// says nothing with it.
func TestHTMLTimeline(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "html_phases.c")
	dir := os.Getenv("MEMTRACE_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	for _, tc := range []struct {
		name, holdMS string
		args         []string
		note         bool
	}{
		{"short", "30", []string{"--detail"}, false},
		{"long", "1500", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), tc.name+".html")
			cmd := exec.Command(memtrace(t), append(append([]string{"--html", page}, tc.args...), "--", bin)...)
			cmd.Env = append(os.Environ(), "HOLD_MS="+tc.holdMS)
			if r := runCmd(t, cmd); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			p := pageTimeline(t, page)
			first := -1
			for i, v := range p.HeapResident {
				switch {
				case v == nil && first >= 0:
					t.Errorf("sample %d: no heap resident after the first reading", i)
				case v != nil && first < 0:
					first = i
				}
				if v != nil && *v == 0 && p.Live[i] >= 1<<20 {
					t.Errorf("sample %d (t=%.3f s): heap resident 0 B with %d bytes live", i, p.T[i], p.Live[i])
				}
				// The long run: half a second into the hold, and a second
				// after the fixture freed half (at 1.5 s), the line
				// holds what the heap does.
				if tc.name == "long" && v != nil && (p.T[i] > 0.5 && p.T[i] < 1.4 && *v < 25<<20 || p.T[i] > 2.6 && (*v < 12<<20 || *v > 14<<20)) {
					t.Errorf("t=%.2f s: heap resident %d, live %d", p.T[i], *v, p.Live[i])
				}
			}
			if first < 0 {
				t.Fatalf("no heap resident reading: %v", p.HeapResident)
			}
			dom := headless.LoadSize(t, page, 1400, 1000)
			// A line, or a dot for a lone reading.
			for _, re := range []string{`data-overflow-px="0"`, `data-resident-from="` + strconv.Itoa(first) + `"`, `<path d="M[0-9.]+,[0-9.]+L[^"]*"[^>]* class="resident"|class="resident-dot"`} {
				if !regexp.MustCompile(re).MatchString(dom) {
					t.Errorf("no %s in the page", re)
				}
			}
			if note := regexp.MustCompile(`<p id="flame-note" class="note" style="">One row: `).MatchString(dom); note != tc.note {
				t.Errorf("flame graph note shown: %v, want %v", note, tc.note)
			}
			if err := headless.Screenshot(page, filepath.Join(dir, "html-"+tc.name+".png"), 1400, 1400); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// pageTimeline reads the timeline's arrays from a page's data (its first
// process).
func pageTimeline(t *testing.T, page string) (p struct {
	T            []float64 `json:"t"`
	Live         []uint64  `json:"live"`
	HeapResident []*uint64 `json:"heapResident"`
}) {
	t.Helper()
	var d struct{ Processes []json.RawMessage }
	if readPageData(t, page, &d); len(d.Processes) == 0 {
		t.Fatalf("%s: no process in the page", page)
	}
	if err := json.Unmarshal(d.Processes[0], &p); err != nil {
		t.Fatal(err)
	}
	return p
}
