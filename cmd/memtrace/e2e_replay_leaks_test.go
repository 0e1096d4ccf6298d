package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// siteKey names a heap call site across runs: function and line.
type siteKey struct {
	Function string
	Line     int
}

// leaksBySite are a run's final leak figures per process (by pid) and per
// heap call site.
func leaksBySite(t *testing.T, out string) (map[int]leakFigures, map[int]map[siteKey]leakFigures) {
	t.Helper()
	procs, sites := leakRecords(t, out)
	byPID := map[int]leakFigures{}
	for _, p := range procs {
		if !p.LeakChecked {
			t.Errorf("pid %d %s: not leak checked", p.PID, p.Comm)
		}
		byPID[p.PID] = p.leakFigures
	}
	bySite := map[int]map[siteKey]leakFigures{}
	for _, s := range sites {
		if bySite[s.PID] == nil {
			bySite[s.PID] = map[siteKey]leakFigures{}
		}
		bySite[s.PID][siteKey{s.Function, s.Line}] = s.leakFigures
	}
	return byPID, bySite
}

// sameLeaks checks that a replay's leak figures are the live run's, per
// process and per site.
func sameLeaks(t *testing.T, live, replay string) {
	t.Helper()
	lp, ls := leaksBySite(t, live)
	rp, rs := leaksBySite(t, replay)
	if len(lp) == 0 {
		t.Fatalf("the live run checked no process")
	}
	for pid, want := range lp {
		if got, ok := rp[pid]; !ok || got != want {
			t.Errorf("pid %d: replay %v, live %v", pid, got, want)
		}
		if len(rs[pid]) != len(ls[pid]) {
			t.Errorf("pid %d: replay has %d sites, live %d", pid, len(rs[pid]), len(ls[pid]))
		}
		for k, w := range ls[pid] {
			if g := rs[pid][k]; g != w {
				t.Errorf("pid %d %s:%d: replay %v, live %v", pid, k.Function, k.Line, g, w)
			}
		}
	}
	if len(rp) != len(lp) {
		t.Errorf("replay checked %d processes, live %d", len(rp), len(lp))
	}
}

var (
	leakSectionStart = regexp.MustCompile(`\npid \d+ [^\n]*: leak check `)
	leakSectionPID   = regexp.MustCompile(`^\npid \d+ `)
)

// leakSection is a text report's leak check section, from its "pid N
// comm: leak check" line on, with the pid left out (it differs between
// runs).
func leakSection(t *testing.T, out string) string {
	t.Helper()
	loc := leakSectionStart.FindStringIndex(out)
	if loc == nil {
		t.Fatalf("no leak check section in:\n%s", out)
	}
	return leakSectionPID.ReplaceAllString(out[loc[0]:], "\npid N ")
}

// TestReplayLeaks: a recorded run's leak check replays exactly — the
// NDJSON and text reports, per class and per call site — and replay's leak
// flags judge it again as a live run with them would have: --leak-kinds,
// --fail-on-leak[=BYTES] (exit 10) and --suppressions.
func TestReplayLeaks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leak/leaks.c")
	dir := t.TempDir()
	rec := func(name string) string { return filepath.Join(dir, name+".rec") }

	t.Run("json and text equal the live run", func(t *testing.T) {
		live := runMemtrace(t, "--json", "--top", "0", "--record", rec("json"), "--", bin)
		if live.code != 0 {
			t.Fatalf("live: exit %d\n%s", live.code, live.stderr)
		}
		// The fixture's figures (valgrind's, TestLeakCheckMatchesValgrind).
		lp, _ := leaksBySite(t, live.stdout)
		want := leakFigures{DefinitelyLostBytes: 132, DefinitelyLostBlocks: 2, IndirectlyLostBytes: 128, IndirectlyLostBlocks: 4,
			PossiblyLostBytes: 64, PossiblyLostBlocks: 1, ReachableBytes: 344, ReachableBlocks: 4}
		for _, f := range lp {
			if f != want {
				t.Fatalf("live: %v, want %v", f, want)
			}
		}
		r := runMemtrace(t, "replay", "--json", "--top", "0", rec("json"))
		if r.code != 0 {
			t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
		}
		sameLeaks(t, live.stdout, r.stdout)
		if got, want := strip(t, r.stdout), strip(t, liveFinal(live.stdout)); got != want {
			t.Errorf("replay NDJSON differs from the live final report\nreplay:\n%s\nlive:\n%s", got, want)
		}

		text := runMemtrace(t, "--raw", "--record", rec("text"), "--", bin)
		rt := runMemtrace(t, "replay", "--raw", rec("text"))
		if rt.code != 0 || rt.stdout != text.stdout {
			t.Errorf("replay text (exit %d) differs from the live report\nreplay:\n%s\nlive:\n%s", rt.code, rt.stdout, text.stdout)
		}
	})

	// C++: blocks reached only by heuristics, and the runtime's own
	// blocks, suppressed by default (the replay matches the suppressions
	// again on the recorded stacks).
	t.Run("C++ heuristics and default suppressions", func(t *testing.T) {
		bin := fixtureCXX(t, "leak/leaks.cc")
		live := runMemtrace(t, "--raw", "--record", rec("cxx"), "--", bin)
		if live.code != 0 || !strings.Contains(live.stdout, "newarray           : 72 bytes in 1 blocks") {
			t.Fatalf("live: exit %d, no heuristic line\n%s\n%s", live.code, live.stdout, live.stderr)
		}
		r := runMemtrace(t, "replay", "--raw", rec("cxx"))
		if r.code != 0 || r.stdout != live.stdout {
			t.Errorf("replay (exit %d) differs from the live report\nreplay:\n%s\nlive:\n%s", r.code, r.stdout, live.stdout)
		}
		nodef := runMemtrace(t, "--raw", "--no-default-suppressions", "--", bin)
		r = runMemtrace(t, "replay", "--raw", "--no-default-suppressions", rec("cxx"))
		if got, want := leakSection(t, r.stdout), leakSection(t, nodef.stdout); got != want || !strings.Contains(got, "suppressed: 0 bytes") {
			t.Errorf("replay --no-default-suppressions differs from the live run with it\nreplay:\n%s\nlive:\n%s", got, want)
		}
	})

	// One detail recording without --fail-on-leak, judged again by replay
	// as live runs with each setting judged themselves. The fixture loses
	// 260 bytes definitely and indirectly, 64 possibly; 344 stay reachable.
	base := runMemtrace(t, "--raw", "--detail", "--record", rec("base"), "--", bin)
	if base.code != 0 {
		t.Fatalf("live: exit %d\n%s", base.code, base.stderr)
	}
	supp := filepath.Join(dir, "supp.txt")
	os.WriteFile(supp, []byte("leak:leak_dropped\n"), 0o644)
	for _, tt := range []struct {
		name  string
		flags []string
		code  int
	}{
		{"default kinds over", []string{"--fail-on-leak=259"}, exitLeak},
		{"default kinds under", []string{"--fail-on-leak=260"}, 0},
		{"all", []string{"--fail-on-leak=300", "--leak-kinds=all"}, exitLeak},
		{"possible", []string{"--fail-on-leak=63", "--leak-kinds=possible"}, exitLeak},
		{"reachable under", []string{"--fail-on-leak=344", "--leak-kinds=reachable"}, 0},
		{"none", []string{"--fail-on-leak", "--leak-kinds=none"}, 0},
		{"suppressed", []string{"--fail-on-leak=159", "--suppressions", supp}, exitLeak},
		{"suppressed under", []string{"--fail-on-leak=160", "--suppressions", supp}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(tt.name, " ", "-")
			live := runMemtrace(t, append(append([]string{"--raw", "--record", rec(name)}, tt.flags...), "--", bin)...)
			if live.code != tt.code {
				t.Fatalf("live: exit %d, want %d\n%s", live.code, tt.code, live.stderr)
			}
			// Replayed with the recorded settings: the live report, and
			// its status.
			same := runMemtrace(t, "replay", "--raw", rec(name))
			if same.code != live.code || same.stdout != live.stdout {
				t.Errorf("replay of the run (exit %d) differs from it (exit %d)\nreplay:\n%s\nlive:\n%s",
					same.code, live.code, same.stdout, live.stdout)
			}
			if !strings.Contains(same.stderr, lostLine(live.stderr)) {
				t.Errorf("replay's stderr lacks the live run's %q:\n%s", lostLine(live.stderr), same.stderr)
			}
			// The other recording judged with the flags: what the live
			// run with them said.
			again := runMemtrace(t, append(append([]string{"replay", "--raw"}, tt.flags...), rec("base"))...)
			if again.code != tt.code {
				t.Errorf("replay %v: exit %d, want %d\n%s", tt.flags, again.code, tt.code, again.stderr)
			}
			if got, want := leakSection(t, again.stdout), leakSection(t, live.stdout); got != want {
				t.Errorf("replay %v's leak check differs from the live run's\nreplay:\n%s\nlive:\n%s", tt.flags, got, want)
			}
		})
	}

	t.Run("no leak check recorded", func(t *testing.T) {
		if live := runMemtrace(t, "--leak-check=false", "--record", rec("off"), "--", bin); live.code != 0 {
			t.Fatalf("live: exit %d\n%s", live.code, live.stderr)
		}
		r := runMemtrace(t, "replay", "--json", rec("off"))
		if r.code != 0 || strings.Contains(r.stdout, "leak_checked") {
			t.Errorf("replay without a recorded check: exit %d, leak fields in\n%s", r.code, r.stdout)
		}
		r = runMemtrace(t, "replay", "--fail-on-leak", rec("off"))
		if r.code != exitUsage || !strings.Contains(r.stderr, "holds no leak check") {
			t.Errorf("replay --fail-on-leak without a recorded check: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// lostLine is the line --fail-on-leak writes on stderr ("" when none).
func lostLine(stderr string) string {
	for l := range strings.Lines(stderr) {
		if strings.Contains(l, "more than --fail-on-leak") {
			return l
		}
	}
	return ""
}
