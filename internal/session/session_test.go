package session

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/tracer"
)

// The live loop's policies on synthetic events (fake_test.go): no root,
// no BPF. cmd/memtrace's e2e tests run the same paths on real probes.

// TestAttachRunning: -p attaches to a running process's allocator, feeds
// its events to the table, and SIGINT ends the run with one final record
// (the process still running) and exit 0.
func TestAttachRunning(t *testing.T) {
	target := startSleeper(t)
	pid := target.Process.Pid
	cfg := testConfig()
	cfg.PIDs = []int{pid}
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	c := r.waitAttached(t, pid)
	if !slices.Contains(c.symbols, "malloc") || !slices.Contains(c.symbols, "free") {
		t.Errorf("probed %v, want malloc and free among them", c.symbols)
	}
	b.send(alloc(pid, 0x1000, 100), alloc(pid, 0x2000, 200), alloc(pid, 0x3000, 300), free(pid, 0x2000), free(pid, 0x9000))
	r.signal(syscall.SIGINT)
	if code := r.wait(t); code != pipeline.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
	}
	got := finals(t, r.stdout.String())[pid]
	want := processRecord{Type: "process", PID: pid, Comm: "sleep", LiveBytes: 400, LiveAllocs: 2, Allocs: 3,
		AllocBytes: 600, Frees: 1, UnmatchedFrees: 1, Final: true}
	if len(got) != 1 || got[0] != want {
		t.Errorf("final records %+v, want one: %+v", got, want)
	}
	if b.loaded.Host || !b.loaded.FaultPIDs {
		t.Errorf("loaded with Host %v FaultPIDs %v, want false true", b.loaded.Host, b.loaded.FaultPIDs)
	}
	if !b.closed {
		t.Error("the probes were not released")
	}
}

// TestTargetsExit: each -p target's final records are printed when it
// exits (once), and the run ends by itself when the last one is gone.
func TestTargetsExit(t *testing.T) {
	a, c := startSleeper(t), startSleeper(t)
	pa, pc := a.Process.Pid, c.Process.Pid
	cfg := testConfig()
	cfg.PIDs = []int{pa, pc}
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	r.waitAttached(t, pa)
	r.waitAttached(t, pc)
	b.send(alloc(pa, 0x1000, 10), alloc(pc, 0x1000, 20))
	a.Process.Kill()
	waitFor(t, "the first target's final record", func() bool {
		return len(finals(t, r.stdout.String())[pa]) > 0
	})
	c.Process.Kill()
	if code := r.wait(t); code != pipeline.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
	}
	f := finals(t, r.stdout.String())
	for pid, bytes := range map[int]uint64{pa: 10, pc: 20} {
		if len(f[pid]) != 1 || !f[pid][0].Exited || f[pid][0].LiveBytes != bytes {
			t.Errorf("pid %d: final records %+v, want one, exited, with %d live bytes", pid, f[pid], bytes)
		}
	}
	if !strings.Contains(r.stderr.String(), "a target exited while traced") {
		t.Errorf("stderr %q does not warn that the targets exited", r.stderr)
	}
}

// TestDeadlineAndInterval: -i prints periodic reports of every target;
// -d ends a -p trace with a final one, the targets still running.
func TestDeadlineAndInterval(t *testing.T) {
	target := startSleeper(t)
	pid := target.Process.Pid
	cfg := testConfig()
	cfg.PIDs = []int{pid}
	cfg.Interval = 5 * time.Millisecond
	cfg.Duration = 200 * time.Millisecond
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	r.waitAttached(t, pid)
	b.send(alloc(pid, 0x1000, 64))
	if code := r.wait(t); code != pipeline.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
	}
	periodic := 0
	for _, p := range processes(t, r.stdout.String()) {
		if !p.Final {
			periodic++
		}
	}
	// 200 ms of 5 ms intervals: however loaded the machine, the loop
	// reports at least twice before the deadline.
	if periodic < 2 {
		t.Errorf("%d periodic records, want >= 2", periodic)
	}
	f := finals(t, r.stdout.String())[pid]
	if len(f) != 1 || f[0].Exited || f[0].LiveBytes != 64 {
		t.Errorf("final records %+v, want one, not exited, 64 live bytes", f)
	}
}

// TestReleaseBuffersAtEnd: the ring's mapped memory is given back before
// the final report once every target has exited (a command's end), and
// kept while -p targets still run and write.
func TestReleaseBuffersAtEnd(t *testing.T) {
	tests := []struct {
		name    string
		command bool
		want    int32
	}{
		{"command exited", true, 1},
		{"-p target running", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			b := newFakeBackend()
			var r *liveRun
			if tt.command {
				cfg.Command = []string{"/bin/true"}
				r = startRun(t, cfg, b)
			} else {
				target := startSleeper(t)
				cfg.PIDs = []int{target.Process.Pid}
				r = startRun(t, cfg, b)
				r.waitAttached(t, target.Process.Pid)
				r.signal(syscall.SIGINT)
			}
			if code := r.wait(t); code != pipeline.ExitOK {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
			}
			if got := b.ring.released.Load(); got != tt.want {
				t.Errorf("ReleaseBuffers called %d times, want %d", got, tt.want)
			}
		})
	}
}

// TestBadTarget: a -p process that does not exist fails before anything
// is loaded, with its exit code and one line.
func TestBadTarget(t *testing.T) {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.PIDs = []int{c.Process.Pid} // reaped: gone
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	if code := r.wait(t); code != pipeline.ExitNoProcess {
		t.Errorf("exit %d, want %d", code, pipeline.ExitNoProcess)
	}
	if b.loaded != nil {
		t.Error("the probes were loaded for a process that does not exist")
	}
	if got := strings.Count(r.stderr.String(), "\n"); got != 1 || r.stdout.String() != "" {
		t.Errorf("stdout %q stderr %q, want nothing and one line", r.stdout, r.stderr)
	}
}

// TestRefused: what the kernel refuses (loading, attaching) ends the run
// with the documented exit code and a one-line message; a command is not
// let run.
func TestRefused(t *testing.T) {
	tests := []struct {
		name              string
		loadErr, attachEr error
		code              int
		message           string
	}{
		{"not root", tracer.ErrPermission, nil, pipeline.ExitPermission, "needs root"},
		{"no BTF", tracer.ErrNoBTF, nil, pipeline.ExitKernel, ""},
		{"old kernel", tracer.ErrOldKernel, nil, pipeline.ExitKernel, ""},
		{"no uprobes", nil, tracer.ErrNoUprobes, pipeline.ExitKernel, ""},
		{"attach not permitted", nil, tracer.ErrPermission, pipeline.ExitPermission, ""},
	}
	for _, tt := range tests {
		for _, mode := range []string{"-p", "--"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				cfg := testConfig()
				ran := t.TempDir() + "/ran"
				if mode == "-p" {
					cfg.PIDs = []int{startSleeper(t).Process.Pid}
				} else {
					cfg.Command = []string{"/bin/sh", "-c", "echo > " + ran}
				}
				b := newFakeBackend()
				b.loadErr, b.probes.attachErr = tt.loadErr, tt.attachEr
				r := startRun(t, cfg, b)
				if code := r.wait(t); code != tt.code {
					t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, r.stderr)
				}
				stderr := r.stderr.String()
				if !strings.HasPrefix(stderr, "memtrace: ") || strings.Count(stderr, "\n") != 1 ||
					!strings.Contains(stderr, tt.message) || r.stdout.String() != "" {
					t.Errorf("stdout %q stderr %q, want nothing and one line saying %q", r.stdout, stderr, tt.message)
				}
				if _, err := os.Stat(ran); err == nil {
					t.Error("the command ran although memtrace could not trace it")
				}
			})
		}
	}
}

// TestCommandStatus: with -- memtrace exits with the command's status
// (128+N for a signal N), and its final record says it exited.
func TestCommandStatus(t *testing.T) {
	tests := []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			cfg := testConfig()
			cfg.Command = []string{"/bin/sh", "-c", tt.script}
			b := newFakeBackend()
			r := startRun(t, cfg, b)
			if code := r.wait(t); code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, r.stderr)
			}
			calls := b.probes.calls()
			if len(calls) != 1 || !slices.Contains(calls[0].symbols, "malloc") {
				t.Errorf("attached %+v, want malloc's probes once, at the exec", calls)
			}
			f := finals(t, r.stdout.String())[calls[0].pid]
			if len(f) != 1 || !f[0].Exited || f[0].Comm != "sh" {
				t.Errorf("final records %+v, want one of sh, exited", f)
			}
		})
	}
}

// TestCommandEvents: a command's events reach its table between its exec
// and its exit, and its final record is printed at its exit.
func TestCommandEvents(t *testing.T) {
	cfg := testConfig()
	cfg.Command = []string{"/bin/sh", "-c", "read x; exit 3"}
	stdin, w := pipe(t)
	b := newFakeBackend()
	r := startRunWith(t, cfg, b, stdin)
	waitFor(t, "the command's probes", func() bool { return len(b.probes.calls()) > 0 })
	pid := b.probes.calls()[0].pid
	b.send(alloc(pid, 0x1000, 100), alloc(pid, 0x2000, 50), free(pid, 0x1000))
	w.Write([]byte("go\n"))
	if code := r.wait(t); code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", code, r.stderr)
	}
	want := processRecord{Type: "process", PID: pid, Comm: "sh", LiveBytes: 50, LiveAllocs: 1, Allocs: 2,
		AllocBytes: 150, Frees: 1, Final: true, Exited: true}
	if f := finals(t, r.stdout.String())[pid]; len(f) != 1 || f[0] != want {
		t.Errorf("final records %+v, want one: %+v", f, want)
	}
}

// TestCommandSignals: SIGTERM is passed on to the command, whose exit ends
// the run; a second SIGINT kills it; -d ends it as timeout(1) would.
func TestCommandSignals(t *testing.T) {
	tests := []struct {
		name    string
		signals []os.Signal
		d       time.Duration
		code    int
	}{
		{"SIGTERM", []os.Signal{syscall.SIGTERM}, 0, 128 + int(syscall.SIGTERM)},
		{"SIGINT twice", []os.Signal{syscall.SIGINT, syscall.SIGINT}, 0, 128 + int(syscall.SIGKILL)},
		{"deadline", nil, 50 * time.Millisecond, 128 + int(syscall.SIGTERM)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Command = []string{"sleep", "60"}
			cfg.Duration = tt.d
			b := newFakeBackend()
			r := startRun(t, cfg, b)
			waitFor(t, "the command's probes", func() bool { return len(b.probes.calls()) > 0 })
			for _, sig := range tt.signals {
				r.signal(sig)
			}
			if code := r.wait(t); code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, r.stderr)
			}
			pid := b.probes.calls()[0].pid
			if f := finals(t, r.stdout.String())[pid]; len(f) != 1 || !f[0].Exited {
				t.Errorf("final records %+v, want one, exited", f)
			}
		})
	}
}

// TestCommandExec: a command's exec restarts its statistics: the old
// program's blocks are forgotten, in the probes too, and the new one is
// probed.
func TestCommandExec(t *testing.T) {
	cfg := testConfig()
	// The exec waits for the first program's event: the loop meets the
	// exec stop as soon as it comes (the ring's poll is woken for it).
	cfg.Command = []string{"/bin/sh", "-c", "read x; exec sleep 60"}
	stdin, w := pipe(t)
	b := newFakeBackend()
	r := startRunWith(t, cfg, b, stdin)
	waitFor(t, "the first program's probes", func() bool { return len(b.probes.calls()) == 1 })
	pid := b.probes.calls()[0].pid
	b.send(alloc(pid, 0x1000, 1000))
	w.Write([]byte("go\n"))
	waitFor(t, "the second program's probes", func() bool { return len(b.probes.calls()) == 2 })
	b.send(alloc(pid, 0x2000, 20))
	r.signal(syscall.SIGTERM)
	if code := r.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), r.stderr)
	}
	if got := b.probes.forgot(); !slices.Equal(got, []uint32{uint32(pid)}) {
		t.Errorf("forgot %v in the probes, want [%d]", got, pid)
	}
	f := finals(t, r.stdout.String())[pid]
	if len(f) != 1 || f[0].Comm != "sleep" || f[0].Allocs != 1 || f[0].LiveBytes != 20 {
		t.Errorf("final records %+v, want one of sleep with its one block of 20 bytes", f)
	}
}

// TestHost: with no target the run attaches exec and exit host-wide and
// probes the allocator of the processes running; a process's exit holds
// its final records for the next batch, printed at the latest with the
// final report; SIGINT ends the run.
func TestHost(t *testing.T) {
	target := startSleeper(t)
	pid := target.Process.Pid
	cfg := testConfig()
	cfg.Heap = true
	b := newFakeBackend()
	b.probes.lost = 3 // the ring was full 3 times: the reports say so
	r := startRun(t, cfg, b, pid)
	c := r.waitAttached(t, 0) // no PID filter
	if !slices.Contains(c.symbols, "malloc") {
		t.Errorf("probed %v host-wide, want malloc among them", c.symbols)
	}
	if !b.probes.host || !b.loaded.Host || b.loaded.FaultPIDs {
		t.Errorf("host tracepoints %v, loaded with Host %v FaultPIDs %v; want true true false",
			b.probes.host, b.loaded.Host, b.loaded.FaultPIDs)
	}
	const gone = 4_000_000 // no such PID: a process that exited since
	b.send(alloc(pid, 0x1000, 100), alloc(gone, 0x1000, 7), alloc(gone, 0x2000, 8), free(gone, 0x1000),
		&event.Event{PID: gone, Kind: event.Exit, Comm: "worker", StackID: -1, Time: monotonicNow()})
	r.signal(syscall.SIGINT)
	if code := r.wait(t); code != pipeline.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
	}
	f := finals(t, r.stdout.String())
	if g := f[gone]; len(g) != 1 || !g[0].Exited || g[0].Comm != "worker" || g[0].Allocs != 2 || g[0].LiveBytes != 8 {
		t.Errorf("exited process: final records %+v, want one of worker, exited, 2 allocations, 8 bytes live", g)
	}
	if s := f[pid]; len(s) != 1 || s[0].Exited || s[0].LiveBytes != 100 {
		t.Errorf("running process: final records %+v, want one, not exited, 100 bytes live", s)
	}
	if got := b.probes.forgot(); !slices.Contains(got, uint32(gone)) {
		t.Errorf("forgot %v in the probes, want the exited process %d", got, gone)
	}
	if n := lostEvents(t, r.stdout.String()); n != 3 {
		t.Errorf("the final report says %d events lost, want 3", n)
	}
}

// TestResident: --resident-bytes attaches the fault tracepoints and
// samples the targets' faults, until each exits (its PID may be reused).
func TestResident(t *testing.T) {
	target := startSleeper(t)
	pid := target.Process.Pid
	cfg := testConfig()
	cfg.PIDs = []int{pid}
	cfg.ResidentBytes = 64 << 10
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	r.waitAttached(t, pid)
	if on, attached := b.probes.tracingFaults(pid); !on || !attached || b.loaded.ResidentBytes != 64<<10 {
		t.Errorf("faults of the target sampled %v, tracepoints attached %v, loaded with ResidentBytes %d; want true true %d",
			on, attached, b.loaded.ResidentBytes, 64<<10)
	}
	target.Process.Kill()
	if code := r.wait(t); code != pipeline.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
	}
	if on, _ := b.probes.tracingFaults(pid); on {
		t.Error("the exited target's faults are still sampled")
	}
}

// TestFollow: with -f a child the command forks is probed before its
// first instruction, and again when it executes a program of its own.
func TestFollow(t *testing.T) {
	cfg := testConfig()
	cfg.Command = []string{"/bin/sh", "-c", "/bin/true; exit 4"}
	cfg.Follow = true
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	if code := r.wait(t); code != 4 {
		t.Fatalf("exit %d, want 4; stderr:\n%s", code, r.stderr)
	}
	byPID := map[int]int{}
	for _, c := range b.probes.calls() {
		byPID[c.pid]++
	}
	sh := b.probes.calls()[0].pid
	var child int
	for pid := range byPID {
		if pid != sh {
			child = pid
		}
	}
	// sh: at its exec; the child: at its fork, and at its exec of true.
	if len(byPID) != 2 || byPID[sh] != 1 || byPID[child] != 2 {
		t.Errorf("attached %v times by PID (sh %d), want sh once and its child twice", byPID, sh)
	}
	f := finals(t, r.stdout.String())
	if len(f[sh]) != 1 || len(f[child]) != 1 || f[child][0].Comm != "true" || !f[child][0].Exited {
		t.Errorf("final records %+v, want one each of sh and of its child true, exited", f)
	}
}
