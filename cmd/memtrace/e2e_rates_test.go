package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
)

// rateRecord and ratedRecord read the "rates" of process and callsite
// records (docs/json.md).
type rateRecord struct {
	HalfLifeS      float64 `json:"half_life_s"`
	AllocBytesPerS float64 `json:"alloc_bytes_per_s"`
	FreeBytesPerS  float64 `json:"free_bytes_per_s"`
	NetBytesPerS   float64 `json:"net_bytes_per_s"`
	AllocsPerS     float64 `json:"allocs_per_s"`
	FreesPerS      float64 `json:"frees_per_s"`
}

type ratedRecord struct {
	Type     string       `json:"type"`
	PID      int          `json:"pid"`
	Category string       `json:"category"`
	Function string       `json:"function"`
	Final    bool         `json:"final"`
	TimeNS   uint64       `json:"time_ns"`
	Rates    []rateRecord `json:"rates"`
}

func parseRated(t *testing.T, out string) []ratedRecord {
	t.Helper()
	var recs []ratedRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r ratedRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad NDJSON line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// checkSteadyRates: 10 MiB/s ±10 % allocated and net at 1 s and 10 s, and
// (almost) nothing freed.
func checkSteadyRates(t *testing.T, what string, rs []rateRecord) {
	t.Helper()
	const want = 10 << 20
	if len(rs) != 3 || rs[0].HalfLifeS != 1 || rs[1].HalfLifeS != 10 || rs[2].HalfLifeS != 100 {
		t.Fatalf("%s: rates %+v, want half-lives 1, 10, 100", what, rs)
	}
	for _, r := range rs[:2] {
		if math.Abs(r.AllocBytesPerS-want) > want/10 || math.Abs(r.NetBytesPerS-want) > want/10 {
			t.Errorf("%s, half-life %gs: alloc %.0f B/s, net %.0f B/s, want %d ±10%%", what, r.HalfLifeS, r.AllocBytesPerS, r.NetBytesPerS, want)
		}
		if r.FreeBytesPerS > want/1000 || r.FreesPerS > 0.5 {
			t.Errorf("%s, half-life %gs: free %.0f B/s (%.2f frees/s), want ~0", what, r.HalfLifeS, r.FreeBytesPerS, r.FreesPerS)
		}
		if math.Abs(r.AllocsPerS-100) > 10 {
			t.Errorf("%s, half-life %gs: %.1f allocs/s, want 100 ±10%%", what, r.HalfLifeS, r.AllocsPerS)
		}
	}
}

// TestRatesSteady traces testdata/rate.c (10 MiB/s for 6 s, never freed)
// and checks the decaying averages in a periodic report taken while it
// runs and in the final one.
func TestRatesSteady(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "rate.c")
	var r result
	for try := 1; ; try++ {
		r = runMemtrace(t, "--json", "-i", "1s", "--", bin, "6")
		// Status 2: the fixture fell behind its schedule (the machine
		// starved it), so what it did was not a steady 10 MiB/s.
		if r.code != 2 || try == 3 {
			break
		}
		t.Logf("try %d: %s", try, strings.TrimSpace(r.stderr))
	}
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	recs := parseRated(t, r.stdout)
	var periodic, final []ratedRecord
	for _, rec := range recs {
		if rec.Type == "process" {
			if rec.Final {
				final = append(final, rec)
			} else {
				periodic = append(periodic, rec)
			}
		}
	}
	if len(final) != 1 || len(periodic) < 4 {
		t.Fatalf("%d periodic and %d final process records, want >= 4 and 1:\n%s", len(periodic), len(final), r.stdout)
	}
	// The last periodic report before the end, taken while it allocated.
	checkSteadyRates(t, "periodic process", periodic[len(periodic)-1].Rates)
	checkSteadyRates(t, "final process", final[0].Rates)
	found := false
	for _, rec := range recs {
		if rec.Type == "callsite" && rec.Final && rec.Function == "steady_alloc" {
			found = true
			checkSteadyRates(t, "steady_alloc", rec.Rates)
		}
	}
	if !found {
		t.Errorf("no final callsite record for steady_alloc:\n%s", r.stdout)
	}
}

// TestRateFlagErrors: half-lives the period does not allow, and malformed
// rate flags, are usage errors (exit 2, one line). They are refused before
// anything is loaded, so no BPF is needed.
func TestRateFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  []string
	}{
		{"s/t = 1", []string{"--half-life", "1s,10s", "--period", "1s", "--", "true"},
			[]string{"half-life 1s is out of range for period 1s", "allows half-lives from 1.000244201s to 1h8m16s"}},
		{"too long for the default period", []string{"--half-life", "1s,1h", "--", "true"},
			[]string{"half-life 1h0m0s is out of range for period 100ms", "from 100.024421ms to 6m49.6s"}},
		{"shorter than the period", []string{"--half-life", "50ms", "--", "true"},
			[]string{"half-life 50ms is out of range for period 100ms"}},
		{"not a duration", []string{"--half-life", "1s,fast", "--", "true"}, []string{`not a duration: "fast"`}},
		{"zero", []string{"--half-life", "0", "--", "true"}, []string{"must be positive"}},
		{"period", []string{"--period", "0", "--", "true"}, []string{"--period 0s: must be at least 1ms"}},
		{"bad sort", []string{"--sort", "speed", "--", "true"}, []string{"valid keys are live, allocated, allocs, rate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runMemtrace(t, tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "memtrace: ") {
				t.Fatalf("stderr should be one line starting memtrace:, got:\n%s", r.stderr)
			}
			for _, m := range tt.msg {
				if !strings.Contains(lines[0], m) {
					t.Errorf("stderr %q lacks %q", lines[0], m)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout should be empty, got %q", r.stdout)
			}
		})
	}
	// Good settings pass the rate checks: what stops these runs is the
	// target given twice (no target at all is the whole-host mode).
	for _, args := range [][]string{nil, {"--half-life", "500ms,1m", "--period", "250ms"}, {"--half-life", "0.2,409.6"}} {
		r := runMemtrace(t, append(args, "-p", "1", "--", "true")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "give -p or a command, not both") {
			t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
}

// TestWatchWithoutTerminal: --watch with stdout not a terminal prints
// plain periodic reports (every second) and the final one; --sort rate
// puts the growing site first with its NET RATE column.
func TestWatchWithoutTerminal(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "rate.c")
	r := runMemtrace(t, "--watch", "--sort", "rate", "--", bin, "3.5", "churn")
	if r.code != 0 && r.code != 2 { // 2: the fixture fell behind (a loaded machine); no matter here
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, "=== memtrace report at"); n < 2 {
		t.Errorf("%d periodic reports, want >= 2:\n%s", n, r.stdout)
	}
	if !strings.Contains(r.stdout, "=== memtrace FINAL report") || !strings.Contains(r.stdout, "rates:       half-life") {
		t.Errorf("no final report with rates:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("escape sequences in a plain report")
	}
	final := r.stdout[strings.Index(r.stdout, "=== memtrace FINAL"):]
	steady, churn := strings.Index(final, "steady_alloc"), strings.Index(final, "churn")
	if !strings.Contains(final, "NET RATE") || steady < 0 || churn < 0 || steady > churn {
		t.Errorf("by net rate steady_alloc (10 MiB/s) should lead churn (0):\n%s", final)
	}
}

// tmux drives a terminal: a private server, one session of a fixed size.
type tmux struct {
	t      *testing.T
	socket string
}

func (x tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", x.socket}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// capture is the pane's text, its history included.
func (x tmux) capture() string {
	return x.run("capture-pane", "-p", "-J", "-S", "-", "-t", "mt")
}

// screen is the visible pane only.
func (x tmux) screen() string {
	return x.run("capture-pane", "-p", "-t", "mt")
}

// waitFor polls the pane until every want is on it.
func (x tmux) waitFor(get func() string, want ...string) string {
	x.t.Helper()
	s, missing := "", ""
	defer func() {
		if missing != "" { // testwait failed the test: what was there
			x.t.Logf("the terminal never showed %q; it shows:\n%s", missing, s)
		}
	}()
	testwait.For(x.t, fmt.Sprintf("the terminal to show %q", want), func() bool {
		s, missing = get(), ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				return false
			}
		}
		return true
	})
	return s
}

// needTmux skips without tmux, except under CI=true (apt-get install tmux).
func needTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but tmux is missing (apt-get install -y tmux)")
	}
	t.Skip("tmux is not installed (apt-get install -y tmux)")
}

// TestWatchInTerminal runs the live view in a real terminal (tmux): the
// bars appear, s changes the sort, q ends the run cleanly with the final
// report. With MEMTRACE_CAPTURE=FILE it saves the view, as shown, there.
func TestWatchInTerminal(t *testing.T) {
	needBPF(t)
	needTmux(t)
	bin := fixture(t, "rate.c")
	target := exec.Command(bin, "120", "churn")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()

	x := tmux{t: t, socket: fmt.Sprintf("memtrace-test-%d", os.Getpid())}
	script := filepath.Join(t.TempDir(), "run.sh")
	os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\n%s --watch -p %d\necho \"memtrace exited with status $?\"\nsleep 600\n",
		memtrace(t), target.Process.Pid)), 0o755)
	x.run("-f", "/dev/null", "new-session", "-d", "-s", "mt", "-x", "132", "-y", "36", script)
	defer exec.Command("tmux", "-L", x.socket, "kill-server").Run()

	// The bars: full blocks on the rates rows, the log-scale axis, the site.
	x.waitFor(x.screen, "memtrace --watch", "allocated/s (log)", "1K", "1M", "1G",
		"steady_alloc", "testdata/rate.c", "sort: live")
	view := x.waitFor(x.screen, "MiB/s", "██")
	t.Logf("the live view:\n%s", view)
	if f := os.Getenv("MEMTRACE_CAPTURE"); f != "" {
		os.WriteFile(f, []byte(view), 0o644)
	}
	if !strings.Contains(view, "call sites by live bytes: 2 heap") {
		t.Errorf("sites not ranked by live bytes at first:\n%s", view)
	}
	// By live bytes steady_alloc (never freed) leads churn (all freed).
	if strings.Index(view, "steady_alloc") > strings.Index(view, "churn") {
		t.Errorf("by live, steady_alloc should lead churn:\n%s", view)
	}

	// s: by bytes allocated churn (256 KiB per 10 ms) leads steady_alloc
	// (100 KiB); then allocs (a tie: 100 calls/s each, broken by live
	// bytes) and rate (steady_alloc grows, churn does not). The title and
	// the table heading follow.
	x.run("send-keys", "-t", "mt", "s")
	view = x.waitFor(x.screen, "sort: allocated", "call sites by bytes allocated")
	if strings.Index(view, "churn") > strings.Index(view, "steady_alloc") {
		t.Errorf("by bytes allocated, churn should lead steady_alloc:\n%s", view)
	}
	x.run("send-keys", "-t", "mt", "s")
	x.waitFor(x.screen, "sort: allocs", "call sites by allocation calls")
	x.run("send-keys", "-t", "mt", "s")
	view = x.waitFor(x.screen, "sort: rate", "call sites by net bytes/s at the shortest half-life")
	t.Logf("sorted by rate:\n%s", view)
	if strings.Index(view, "steady_alloc") > strings.Index(view, "churn") {
		t.Errorf("by net rate, steady_alloc should lead churn:\n%s", view)
	}

	// q: the view goes away, the final report is printed, memtrace exits 0.
	x.run("send-keys", "-t", "mt", "q")
	out := x.waitFor(x.capture, "memtrace exited with status 0")
	for _, want := range []string{"=== memtrace FINAL report", "pid " + strconv.Itoa(target.Process.Pid) + " rate",
		"rates:       half-life", "steady_alloc"} {
		if !strings.Contains(out, want) {
			t.Errorf("after q the terminal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(x.screen(), "allocated/s (log)") {
		t.Errorf("the live view is still on screen after q:\n%s", x.screen())
	}
	t.Logf("after q:\n%s", out)
}

// TestCommandKeepsTerminal: a -- command gets memtrace's own terminal, not
// a pipe copied through memtrace's writer (its output would change:
// ls's columns, stdio's buffering).
func TestCommandKeepsTerminal(t *testing.T) {
	needBPF(t)
	needTmux(t)
	x := tmux{t: t, socket: fmt.Sprintf("memtrace-tty-%d", os.Getpid())}
	script := filepath.Join(t.TempDir(), "run.sh")
	os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\n%s -o /dev/null -- sh -c 'test -t 1 && test -t 2 && echo both-terminals'\necho \"memtrace exited with status $?\"\nsleep 600\n",
		memtrace(t))), 0o755)
	x.run("-f", "/dev/null", "new-session", "-d", "-s", "mt", "-x", "132", "-y", "36", script)
	defer exec.Command("tmux", "-L", x.socket, "kill-server").Run()
	x.waitFor(x.screen, "both-terminals", "memtrace exited with status 0")
}
