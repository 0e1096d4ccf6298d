package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// TestSampledStacks: sampled mode without --detail unwinds each sampled
// allocation's whole stack. testdata/sampled_stacks.c reaches one call
// site by two chains; at --sample-bytes 64 its blocks are all sampled,
// each weighing 1, so every figure is exact. The tables keep one row for
// the call site, as without stacks; --pprof has one sample per chain down
// to main, adding up to the JSON report's estimates; --folded likewise;
// replaying the run's recording writes the same profile.
func TestSampledStacks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "sampled_stacks.c")
	dir := t.TempDir()
	pprofFile, foldedFile, rec := filepath.Join(dir, "heap.pb.gz"), filepath.Join(dir, "live.folded"), filepath.Join(dir, "run.rec")
	r := runMemtrace(t, "--sample-bytes", "64", "--json", "--top", "0", "--pprof", pprofFile, "--folded", foldedFile, "--record", rec, "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}

	// The table: one row for make_block's call site, no stack.
	var rows []siteRecord
	for _, s := range parseNDJSON(t, r.stdout).sites {
		if s.Final && s.Category == "heap" && s.Function == "make_block" {
			rows = append(rows, s)
		}
	}
	if len(rows) != 1 {
		t.Fatalf("%d final rows of make_block, want 1: %+v", len(rows), rows)
	}
	row := rows[0]
	wantRow := [6]uint64{50, 573440, 5, 81920, 45, 491520}
	if got := [6]uint64{row.Allocs, row.AllocBytes, row.Frees, row.FreedBytes, row.LiveAllocs, row.LiveBytes}; got != wantRow || len(row.Stack) != 0 {
		t.Errorf("make_block row %v with %d frames, want %v and no stack", got, len(row.Stack), wantRow)
	}

	// The profile: a sample per chain, adding up to the row.
	want := map[string][4]int64{
		"make_block/left/main":         {30, 245760, 30, 245760},
		"make_block/middle/right/main": {20, 327680, 15, 245760},
	}
	got := fixtureSamples(t, readProfile(t, pprofFile))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pprof samples of make_block:\n%v\nwant\n%v", got, want)
	}
	var sum [4]int64
	for _, v := range got {
		for i := range v {
			sum[i] += v[i]
		}
	}
	if rowValues := [4]int64{int64(row.Allocs), int64(row.AllocBytes), int64(row.LiveAllocs), int64(row.LiveBytes)}; sum != rowValues {
		t.Errorf("pprof sums %v, the JSON row %v", sum, rowValues)
	}

	b, err := os.ReadFile(foldedFile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, "make_block ") {
			lines = append(lines, l)
		}
	}
	if w := "main;left;make_block 245760\nmain;right;middle;make_block 245760"; strings.Join(lines, "\n") != w {
		t.Errorf("folded lines of make_block:\n%s\nwant\n%s", strings.Join(lines, "\n"), w)
	}

	// Replay: the recording carries the stacks.
	replayed := filepath.Join(dir, "replay.pb.gz")
	if rr := runMemtrace(t, "replay", rec, "--pprof", replayed); rr.code != 0 {
		t.Fatalf("replay: exit %d: %s", rr.code, rr.stderr)
	}
	if again := fixtureSamples(t, readProfile(t, replayed)); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Errorf("replayed pprof samples:\n%v\nlive run's:\n%v", again, got)
	}

	// The text table: make_block's rows only, no stack printed under them.
	r = runMemtrace(t, "--sample-bytes", "64", "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		for _, fn := range []string{"left", "middle", "right"} {
			if strings.Contains(l, fn) {
				t.Errorf("the table names %s, a caller of the call site: %q\n%s", fn, l, r.stdout)
			}
		}
	}
}

// fixtureSamples maps the stack (functions, innermost first, "/" between
// frames) of each sample of make_block to its values, summed.
func fixtureSamples(t *testing.T, p *profile.Profile) map[string][4]int64 {
	t.Helper()
	m := map[string][4]int64{}
	for _, s := range p.Sample {
		var fns []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				fns = append(fns, ln.Function.Name)
			}
		}
		if len(fns) == 0 || fns[0] != "make_block" {
			continue
		}
		k := strings.Join(fns, "/")
		addValues(m, k, s.Value)
	}
	return m
}
