package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// waiting is a child that said "ready" and waits for a byte on stdin
// (mallocfree's wait mode), so that probes go in before its loop starts.
type waiting struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	waited bool
}

func startWaiting(ctx context.Context, name string, args ...string) (*waiting, error) {
	w := &waiting{cmd: command(ctx, name, args...)}
	var err error
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	w.stdout = bufio.NewReader(out)
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// A child killed by ctx closes its stdout, so this cannot hang.
	line, err := w.stdout.ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		w.stop()
		return nil, fmt.Errorf("%s did not say ready (%q, %v)%s", name, line, err, tail(w.stderr.String()))
	}
	return w, nil
}

func (w *waiting) pid() int { return w.cmd.Process.Pid }

// proceed lets the child run and returns its stdout once it has exited.
func (w *waiting) proceed() (string, error) {
	if _, err := w.stdin.Write([]byte{'g'}); err != nil {
		return "", fmt.Errorf("wake %s: %w", w.cmd.Path, err)
	}
	w.stdin.Close()
	out, _ := io.ReadAll(w.stdout)
	w.waited = true
	if err := w.cmd.Wait(); err != nil {
		return string(out), fmt.Errorf("%s: %w%s", w.cmd.Path, err, tail(w.stderr.String()))
	}
	return string(out), nil
}

// stop kills the child (and its group) unless it was already waited for.
func (w *waiting) stop() {
	if w.waited {
		return
	}
	killGroup(w.cmd)
	w.stdin.Close()
	_ = w.cmd.Wait()
	w.waited = true
}
