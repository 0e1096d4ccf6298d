package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

// TestHTMLTimeline: the --html page of testdata/html_phases.c, a short run
// (drawn against bytes turned over) and a long one (against time), each
// loaded at 1400 px and photographed ($MEMTRACE_SHOTS keeps the PNGs).
// The heap-resident line has no point before the first footprint reading
// and none at 0 B while the heap holds its 25 MiB; by the end of each of
// the long run's phases it holds what the heap does; the page does not
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
		{"long", "2500", nil, true},
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
			}
			if first < 0 {
				t.Fatalf("no heap resident reading: %v", p.HeapResident)
			}
			if tc.name == "long" {
				p.caughtUp(t)
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

// timeline is a page's timeline arrays (its first process).
type timeline struct {
	T            []float64 `json:"t"`
	Live         []uint64  `json:"live"`
	HeapResident []*uint64 `json:"heapResident"`
}

// caughtUp checks the long run's line at the end of the fixture's phases,
// found by the heap's live bytes, not by the clock: a reading taken while
// the fixture still wrote its blocks (a loaded machine slows it) is right
// for its moment and stands until the next, due within the timeline's
// period (pipeline.FootprintEvery, 1 s), well within each hold (2.5 s).
// The last point holding 25 MiB has all their pages (257 each, with
// malloc's header); the last point of all (13 MiB live) has 13 blocks'.
func (p timeline) caughtUp(t *testing.T) {
	t.Helper()
	const MiB = 1 << 20
	hold, last := -1, len(p.T)-1
	for i, l := range p.Live {
		if l == 25*MiB {
			hold = i
		}
	}
	for _, c := range []struct {
		what     string
		i        int
		live     uint64
		min, max uint64
	}{
		{"the end of the hold", hold, 25 * MiB, 25 * MiB, 26 * MiB},
		{"the exit", last, 13 * MiB, 13 * MiB, 14 * MiB},
	} {
		if c.i < 0 || p.Live[c.i] != c.live || p.HeapResident[c.i] == nil {
			t.Errorf("%s: no point with %d bytes live and a reading (live %v)", c.what, c.live, p.Live)
			continue
		}
		if v := *p.HeapResident[c.i]; v < c.min || v > c.max {
			t.Errorf("%s (t=%.2f s): heap resident %d, want %d to %d (live %d)", c.what, p.T[c.i], v, c.min, c.max, p.Live[c.i])
		}
	}
}

// pageTimeline reads the timeline's arrays from a page's data (its first
// process).
func pageTimeline(t *testing.T, page string) (p timeline) {
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
