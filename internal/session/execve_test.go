package session

import (
	"encoding/json"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// execveFault is a sampled fault of execve's own (bpf/memtrace.h's
// FAULT_PC_EXECVE): one 4 KiB page of the new program's stack.
func execveFault(pid int, addr uint64) *event.Event {
	return &event.Event{PID: uint32(pid), Kind: event.Fault, Addr: addr, Size: 4096, OldSize: 4096,
		CallSite: symbolize.ExecveSite, StackID: -1, Time: monotonicNow()}
}

// execvePages counts the pages charged to execve in pid's last resident
// records of out.
func execvePages(t *testing.T, out string, pid int) uint64 {
	t.Helper()
	var pages uint64
	for l := range strings.Lines(out) {
		var r struct {
			Type     string `json:"type"`
			PID      int    `json:"pid"`
			Function string `json:"function"`
			Pages    uint64 `json:"sampled_pages"`
		}
		if json.Unmarshal([]byte(l), &r) == nil && r.Type == "resident" && r.PID == pid && r.Function == symbolize.ExecveFunction {
			pages = r.Pages
		}
	}
	return pages
}

// TestExecveHeldHost: the whole host holds execve's writes, which come
// before their exec event, until that exec has restarted the process's
// statistics; a process that exits before its exec event drops them.
func TestExecveHeldHost(t *testing.T) {
	cfg := testConfig()
	cfg.ResidentBytes = 4096
	b := newFakeBackend()
	r := startRun(t, cfg, b)
	waitFor(t, "the fault tracepoints", func() bool { _, on := b.probes.tracingFaults(0); return on })
	const execs, dies = 4_000_000, 4_000_001 // no such PIDs: processes gone since
	b.send(execveFault(execs, 0x7ff0_0000_0000), execveFault(execs, 0x7ff0_0000_1000),
		&event.Event{PID: execs, Kind: event.Exec, Size: 1, Comm: "prog", StackID: -1, Time: monotonicNow()},
		&event.Event{PID: execs, Kind: event.Exit, Comm: "prog", StackID: -1, Time: monotonicNow()},
		execveFault(dies, 0x7ff0_0000_0000),
		&event.Event{PID: dies, Kind: event.Exit, Comm: "sh", StackID: -1, Time: monotonicNow()})
	r.signal(syscall.SIGINT)
	if code := r.wait(t); code != pipeline.ExitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
	}
	out := r.stdout.String()
	if got := execvePages(t, out, execs); got != 2 {
		t.Errorf("process that executed a program: %d pages charged to execve, want 2:\n%s", got, out)
	}
	if got := execvePages(t, out, dies); got != 0 {
		t.Errorf("process that exited first: %d pages charged to execve, want none:\n%s", got, out)
	}
}

// TestExecveHeldCommand: a command's second program keeps the pages its
// execve wrote: they come before its exec stop, which restarts the
// statistics.
func TestExecveHeldCommand(t *testing.T) {
	cfg := testConfig()
	cfg.ResidentBytes = 4096
	// sh executes sleep once it reads a line: after the fault is sent.
	// Without address randomization (setarch -R) sleep's stack ends at
	// 0x7ffffffff000, its last page the environment's: the check at its
	// exit finds the page resident.
	cfg.Command = []string{"/usr/bin/setarch", "-R", "/bin/sh", "-c", "read line; exec sleep 60"}
	b := newFakeBackend()
	stdin, w := io.Pipe()
	defer w.Close()
	r := startRunWith(t, cfg, b, stdin)
	waitFor(t, "sh's probes", func() bool { return len(b.probes.calls()) == 2 })
	pid := b.probes.calls()[0].pid
	b.send(execveFault(pid, 0x7ffffffff000-4096))
	io.WriteString(w, "go\n")
	waitFor(t, "sleep's probes", func() bool { return len(b.probes.calls()) == 3 })
	r.signal(syscall.SIGTERM)
	if code := r.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), r.stderr)
	}
	if got := execvePages(t, r.stdout.String(), pid); got != 1 {
		t.Errorf("%d pages charged to execve, want 1:\n%s", got, r.stdout.String())
	}
}
