package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// command prepares a child in its own process group. Ending ctx kills the
// whole group: memtrace's traced command, heaptrack's interpreter and
// valgrind's helpers must not outlive a run that was interrupted or timed
// out. Pdeathsig covers the harness itself dying.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Stop waiting for output pipes a leftover grandchild might hold open.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// killGroup ends a child started by command and everything it started.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// output is what a finished child printed and how long it ran.
type output struct {
	stdout, stderr string
	wall           time.Duration
	// cpu is the child's user+system time plus that of the children it
	// waited for (wait4 reports both).
	cpu time.Duration
}

// run runs cmd to its end within timeout and returns what it printed.
func run(ctx context.Context, timeout time.Duration, name string, args ...string) (output, error) {
	return runEnv(ctx, timeout, nil, name, args...)
}

// runEnv is run with env added to the child's environment.
func runEnv(ctx context.Context, timeout time.Duration, env []string, name string, args ...string) (output, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := command(ctx, name, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	o := output{stdout: stdout.String(), stderr: stderr.String(), wall: time.Since(start)}
	if cmd.ProcessState != nil {
		o.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return o, fmt.Errorf("%s: killed after %v", name, timeout)
		}
		return o, fmt.Errorf("%s: %w%s", name, err, tail(o.stderr))
	}
	return o, nil
}

// tail is the end of a child's stderr, for error messages.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 800 {
		s = "…" + s[len(s)-800:]
	}
	return ": " + s
}

// pairReport is mallocfree's result line.
type pairReport struct {
	nsPerPair float64
	pairs     int64
	threads   int
	cpu       time.Duration
}

// parsePairReport finds "ns_per_pair=F pairs=N threads=T cpu_ns=C" in
// out, which may also hold the tool's own lines (heaptrack prints some).
func parsePairReport(out string) (pairReport, error) {
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "ns_per_pair=") {
			continue
		}
		var r pairReport
		var cpu int64
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			var err error
			switch k {
			case "ns_per_pair":
				r.nsPerPair, err = strconv.ParseFloat(v, 64)
			case "pairs":
				r.pairs, err = strconv.ParseInt(v, 10, 64)
			case "threads":
				r.threads, err = strconv.Atoi(v)
			case "cpu_ns":
				cpu, err = strconv.ParseInt(v, 10, 64)
			}
			if err != nil {
				return r, fmt.Errorf("mallocfree printed %q: %w", line, err)
			}
		}
		r.cpu = time.Duration(cpu)
		return r, nil
	}
	return pairReport{}, errors.New("mallocfree printed no ns_per_pair line" + tail(out))
}
