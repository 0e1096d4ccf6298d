package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The whole host's list: every process, whether or not it takes a fault
// while memtrace runs, ranked by RSS (report/hostlist.go).

// idle is a running testdata/idle.c: it holds its memory, touched before
// memtrace starts, and exits when its input is closed.
type idle struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startIdle starts bin holding mib MiB and waits until it says "ready".
func startIdle(t *testing.T, bin string, mib int) *idle {
	t.Helper()
	c := exec.Command(bin, strconv.Itoa(mib))
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	expectLine(t, bufio.NewReader(stdout), "ready")
	return &idle{cmd: c, stdin: stdin}
}

// exit ends it and waits for it.
func (i *idle) exit(t *testing.T) {
	t.Helper()
	i.stdin.Close()
	if err := i.cmd.Wait(); err != nil {
		t.Fatalf("idle fixture: %v", err)
	}
}

func (i *idle) pid() int { return i.cmd.Process.Pid }

// listRecord is a whole-host process record's list fields.
type listRecord struct {
	Type      string `json:"type"`
	PID       int    `json:"pid"`
	Comm      string `json:"comm"`
	Rank      *int   `json:"rank"`
	Traced    *bool  `json:"traced"`
	Exited    bool   `json:"exited"`
	Final     bool   `json:"final"`
	Footprint struct {
		RSS uint64 `json:"rss_bytes"`
		PSS uint64 `json:"pss_bytes"`
	} `json:"footprint"`
}

// reportGroups splits NDJSON into reports: each starts at a report line.
func reportGroups(t *testing.T, out string) [][]listRecord {
	t.Helper()
	var groups [][]listRecord
	for l := range strings.Lines(out) {
		var r listRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Type == "report" {
			groups = append(groups, nil)
			continue
		}
		if r.Type == "process" && len(groups) > 0 {
			groups[len(groups)-1] = append(groups[len(groups)-1], r)
		}
	}
	return groups
}

// TestHostListIdle: a process that holds 100 MiB, touched before
// memtrace starts, and takes no fault while it runs is in the final
// report with its RSS, ranked above a smaller one, untraced; every
// process of the host is listed once, by rank, by RSS, kernel threads
// and memtrace excepted; processes that exit during the run are
// summarised once, in one batch just before the final report.
func TestHostListIdle(t *testing.T) {
	needBPF(t)
	bin := filepath.Join(binDir, "mt-idle")
	copyFile(t, fixture(t, "idle.c"), bin)
	big, small := startIdle(t, bin, 100), startIdle(t, bin, 30)

	h := startHostWith(t, "--top", "0")
	var gone []int
	for range 3 {
		// Each faults while traced (it touches 4 MiB), then exits.
		i := startIdle(t, bin, 4)
		gone = append(gone, i.pid())
		i.exit(t)
	}
	// Every exit seen before the end: the fixtures' are in the ring when
	// Wait returns; memtrace drains it before its final report.
	h.cmd.Process.Signal(syscall.SIGINT)
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, h.errors())
	}
	groups := reportGroups(t, h.stdout.String())
	if len(groups) != 2 {
		t.Fatalf("%d reports, want 2 (the exits' batch, the final report):\n%s", len(groups), h.stdout.String())
	}
	exits, final := groups[0], groups[1]

	t.Run("exits once", func(t *testing.T) {
		seen := map[int]int{}
		for _, r := range exits {
			if !r.Exited || !r.Final {
				t.Errorf("record of the exits' batch not exited and final: %+v", r)
			}
			seen[r.PID]++
		}
		for _, pid := range gone {
			if seen[pid] != 1 {
				t.Errorf("pid %d: %d exit records, want 1 (batch: %+v)", pid, seen[pid], exits)
			}
		}
	})
	t.Run("final list", func(t *testing.T) {
		rank := map[int]listRecord{}
		for i, r := range final {
			if r.Rank == nil || *r.Rank != i+1 || r.Traced == nil {
				t.Fatalf("record %d has rank %v traced %v, want rank %d: %+v", i, r.Rank, r.Traced, i+1, r)
			}
			if i > 0 && r.Footprint.RSS > final[i-1].Footprint.RSS {
				t.Errorf("rank %d (pid %d, RSS %d) above rank %d (RSS %d): not by RSS", i+1, r.PID, r.Footprint.RSS, i, final[i-1].Footprint.RSS)
			}
			if _, dup := rank[r.PID]; dup {
				t.Errorf("pid %d listed twice", r.PID)
			}
			rank[r.PID] = r
		}
		b, ok := rank[big.pid()]
		if !ok {
			t.Fatalf("the idle 100 MiB process %d is not listed:\n%+v", big.pid(), final)
		}
		if b.Footprint.RSS < 100<<20 || b.Footprint.PSS == 0 || *b.Traced || b.Comm != "mt-idle" {
			t.Errorf("idle 100 MiB process: %+v, want RSS >= 100 MiB, a PSS, untraced", b)
		}
		if s, ok := rank[small.pid()]; !ok || *s.Rank <= *b.Rank {
			t.Errorf("the 30 MiB process %+v is not ranked below the 100 MiB one (rank %d)", s, *b.Rank)
		}
		for _, pid := range []int{2, h.cmd.Process.Pid} { // kthreadd, memtrace
			if r, ok := rank[pid]; ok {
				t.Errorf("pid %d listed: %+v", pid, r)
			}
		}
		for _, pid := range gone {
			if r, ok := rank[pid]; ok {
				t.Errorf("pid %d exited, still listed: %+v", pid, r)
			}
		}
	})
}

// TestHostListText: the text report lists the idle process with its RSS
// (--raw: in bytes), and says what ~RESIDENT is.
func TestHostListText(t *testing.T) {
	needBPF(t)
	bin := filepath.Join(binDir, "mt-idletext")
	copyFile(t, fixture(t, "idle.c"), bin)
	big := startIdle(t, bin, 100)
	h := startHostWith(t, "--comm", "mt-idletext", "--json=false", "--raw")
	h.cmd.Process.Signal(syscall.SIGINT)
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, h.errors())
	}
	out := h.stdout.String()
	for _, want := range []string{"whole host: 1 process, 0 traced", "processes by RSS (all 1):",
		"~RESIDENT: only what became resident while memtrace watched"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	row := ""
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) > 2 && f[0] == strconv.Itoa(big.pid()) {
			row = l
			if rss, err := strconv.ParseUint(f[2], 10, 64); err != nil || rss < 100<<20 || f[1] != "mt-idletext" {
				t.Errorf("row %q: want comm mt-idletext and RSS >= 100 MiB", l)
			}
		}
	}
	if row == "" {
		t.Errorf("no row of pid %d:\n%s", big.pid(), out)
	}
}

// TestWatchHost: --watch with no target is a table of the host's
// processes by RSS; the idle process is in it, and ↓ selects the next.
func TestWatchHost(t *testing.T) {
	needBPF(t)
	needTmux(t)
	bin := filepath.Join(binDir, "mt-idlewatch")
	copyFile(t, fixture(t, "idle.c"), bin)
	big, small := startIdle(t, bin, 100), startIdle(t, bin, 30)

	x := tmux{t: t, socket: fmt.Sprintf("memtrace-host-%d", os.Getpid())}
	script := filepath.Join(t.TempDir(), "run.sh")
	os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\n%s --watch --comm mt-idlewatch\necho \"memtrace exited with status $?\"\nsleep 600\n",
		memtrace(t))), 0o755)
	x.run("-f", "/dev/null", "new-session", "-d", "-s", "mt", "-x", "132", "-y", "36", script)
	defer exec.Command("tmux", "-L", x.socket, "kill-server").Run()

	view := x.waitFor(x.screen, "memtrace --watch", "2 processes by RSS, 0 traced", "~RESIDENT",
		"pid "+strconv.Itoa(big.pid())+" mt-idlewatch", "no fault sampled, no allocation seen while traced")
	t.Logf("the live view:\n%s", view)
	// The 100 MiB process leads, with its RSS, in MiB.
	if i, j := strings.Index(view, strconv.Itoa(big.pid())+"  mt-idlewatch"), strings.Index(view, strconv.Itoa(small.pid())+"  mt-idlewatch"); i < 0 || j < 0 || i > j {
		t.Errorf("the 100 MiB process should lead the 30 MiB one:\n%s", view)
	}
	if !strings.Contains(view, "100.") || strings.Contains(view, "allocated/s") {
		t.Errorf("no RSS of 100.x MiB, or an allocator panel without --heap:\n%s", view)
	}
	x.run("send-keys", "-t", "mt", "Down")
	x.waitFor(x.screen, "pid "+strconv.Itoa(small.pid())+" mt-idlewatch")
	x.run("send-keys", "-t", "mt", "s")
	x.waitFor(x.screen, "sort: anon", "2 processes by anonymous RSS")
	x.run("send-keys", "-t", "mt", "q")
	x.waitFor(x.capture, "memtrace exited with status 0", "FINAL report")
}

// TestHostListReplay: a replay lists the processes the live run listed
// for their footprint alone, as it printed them (their readings are
// recorded), in text and in NDJSON.
func TestHostListReplay(t *testing.T) {
	needBPF(t)
	bin := filepath.Join(binDir, "mt-idlereplay")
	copyFile(t, fixture(t, "idle.c"), bin)
	big := startIdle(t, bin, 100)
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "host.rec")
			h := startHostWith(t, "--comm", "mt-idlereplay", "--record", rec, "--json="+boolFlag(format == "json"))
			h.cmd.Process.Signal(syscall.SIGINT)
			if err := h.cmd.Wait(); err != nil {
				t.Fatalf("memtrace: %v\n%s", err, h.errors())
			}
			live := h.stdout.String()
			if !strings.Contains(live, strconv.Itoa(big.pid())) {
				t.Fatalf("the live run does not list the idle process %d:\n%s", big.pid(), live)
			}
			sameOutput(t, format, replayIn(t, format, rec).stdout, live)
		})
	}
}
