package launch

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: ptrace tests must run in CI")
		}
		t.Skip("needs root (ptrace of a child is allowed, but the tests also read registers of others)")
	}
}

// collect resumes every stop and returns them, with the command's status.
func collect(t *testing.T, c *Child) ([]Stop, int) {
	t.Helper()
	var stops []Stop
	code := -1
	timeout := time.After(30 * time.Second)
	done := c.Done
	for st := range c.Stops {
		stops = append(stops, st)
		if st.Kind == Exit && st.Regs == nil {
			t.Errorf("exit stop of %d without registers", st.PID)
		}
		if st.Kind == Exit && st.Regs != nil && st.Regs.Rsp == 0 {
			t.Errorf("exit stop of %d: sp 0", st.PID)
		}
		st.Resume()
		select {
		case ws := <-done:
			code = ExitCode(ws)
			done = nil
		case <-timeout:
			t.Fatal("timed out")
		default:
		}
	}
	if done != nil {
		code = ExitCode(<-done)
	}
	return stops, code
}

func kinds(stops []Stop, pid int) []StopKind {
	var k []StopKind
	for _, s := range stops {
		if s.PID == pid {
			k = append(k, s.Kind)
		}
	}
	return k
}

func TestStartStopsAtExecAndExit(t *testing.T) {
	needRoot(t)
	c, err := Start(Spec{Args: []string{"/bin/sh", "-c", "exit 7"}, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	stops, code := collect(t, c)
	if got := kinds(stops, c.PID); !slices.Equal(got, []StopKind{Exec, Exit}) {
		t.Errorf("stops %v, want exec exit", got)
	}
	if code != 7 {
		t.Errorf("status %d, want 7", code)
	}
}

// TestFollow: with Follow, a forked child gets Fork, Exec, Exit and Ended
// stops of its own, and the command's status is its own.
func TestFollow(t *testing.T) {
	needRoot(t)
	// The subshell forks /bin/true; sh waits for it and exits 3.
	c, err := Start(Spec{Args: []string{"/bin/sh", "-c", "/bin/true; exit 3"}, Stdout: io.Discard,
		Stderr: io.Discard, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	stops, code := collect(t, c)
	if code != 3 {
		t.Errorf("status %d, want 3", code)
	}
	var kid int
	for _, s := range stops {
		if s.Kind == Fork {
			if s.Parent != c.PID {
				t.Errorf("fork of %d by %d, want parent %d", s.PID, s.Parent, c.PID)
			}
			kid = s.PID
		}
	}
	if kid == 0 {
		t.Fatalf("no fork stop: %+v", stops)
	}
	if got := kinds(stops, kid); !slices.Equal(got, []StopKind{Fork, Exec, Exit, Ended}) {
		t.Errorf("child stops %v, want fork exec exit ended", got)
	}
	// Without Follow the child is not seen.
	c, err = Start(Spec{Args: []string{"/bin/sh", "-c", "/bin/true; exit 3"}, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	stops, _ = collect(t, c)
	for _, s := range stops {
		if s.PID != c.PID {
			t.Errorf("stop of another process without Follow: %+v", s)
		}
	}
}

// TestFreeze stops a running process, reads every thread's registers and
// lets it go on.
func TestFreeze(t *testing.T) {
	needRoot(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	testwait.Mapped(t, cmd.Process.Pid, "/libc.so") // sleep itself runs, past exec and the loader
	f, err := Freeze(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Threads) != 1 || f.Threads[0].TID != cmd.Process.Pid || f.Threads[0].Regs.Rsp == 0 {
		t.Errorf("threads %+v", f.Threads)
	}
	if err := f.Release(); err != nil {
		t.Fatal(err)
	}
	// Still alive and not stopped: it ends by SIGTERM as usual.
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		t.Errorf("after release: %v", err)
	}
	if _, err := Freeze(1 << 30); err == nil {
		t.Error("froze a process that does not exist")
	}
}
