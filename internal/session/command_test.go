package session

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/tracer"
)

// TestCommandWhileLoading: a command starts while the probes load and
// waits at its exec stop, its new program not yet run, until its probes
// are attached; if the load fails, it is killed there, never let run.
func TestCommandWhileLoading(t *testing.T) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{false, true} {
		name := "loaded"
		if fail {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			ran := t.TempDir() + "/ran"
			cfg.Command = []string{"/bin/sh", "-c", "echo > " + ran}
			b := newFakeBackend()
			b.loading = make(chan struct{})
			if fail {
				b.loadErr = tracer.ErrPermission
			}
			r := startRun(t, cfg, b)
			var pid int
			waitFor(t, "the command at its exec stop, the probes still loading", func() bool {
				pid = childAtStop(sh, ran)
				return pid != 0
			})
			if _, err := os.Stat(ran); err == nil {
				t.Fatal("the command ran before its probes were loaded")
			}
			if calls := b.probes.calls(); len(calls) != 0 {
				t.Fatalf("attached %+v before the probes were loaded", calls)
			}
			close(b.loading)
			code := r.wait(t)
			if fail {
				if code != pipeline.ExitPermission {
					t.Errorf("exit %d, want %d; stderr:\n%s", code, pipeline.ExitPermission, r.stderr)
				}
				// Killed before the run returned: memtrace exits next,
				// and a tracee left stopped would then run untraced.
				if !killed(pid) {
					t.Fatal("the run returned, its command not killed")
				}
				waitFor(t, "the command killed", func() bool { return !alive(pid) })
				if _, err := os.Stat(ran); err == nil {
					t.Error("the command ran although its probes could not be loaded")
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr)
			}
			if calls := b.probes.calls(); len(calls) != 1 || calls[0].pid != pid {
				t.Errorf("attached %+v, want once, to %d", calls, pid)
			}
			if _, err := os.Stat(ran); err != nil {
				t.Errorf("the command did not run once attached: %v", err)
			}
		})
	}
}

// childAtStop is a child of this process running exe with arg among its
// arguments, stopped by its tracer (state t); 0 if there is none.
func childAtStop(exe, arg string) int {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, ok := procState(pid)
		if !ok || ppid != self || state != "t" {
			continue
		}
		got, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil || got != exe {
			continue
		}
		if cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(arg)) {
			return pid
		}
	}
	return 0
}

// alive: pid exists and is no zombie.
func alive(pid int) bool {
	state, _, ok := procState(pid)
	return ok && state != "Z"
}

// killed: pid is gone, a zombie, or has SIGKILL pending.
func killed(pid int) bool {
	if !alive(pid) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != "SigPnd:" && f[0] != "ShdPnd:") {
			continue
		}
		if mask, err := strconv.ParseUint(f[1], 16, 64); err == nil && mask&(1<<(9-1)) != 0 {
			return true
		}
	}
	return !alive(pid)
}

// procState reads pid's state and parent from /proc/PID/stat.
func procState(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// The fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}
