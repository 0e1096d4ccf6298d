package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tracing is a `memtrace -v -p PID` run that has attached.
type tracing struct {
	cmd     *exec.Cmd
	drained chan struct{}
	mu      sync.Mutex
	stderr  bytes.Buffer // what it logged after attaching
	waited  bool
}

// startTracing launches memtrace (args must include -v and -p) and returns
// once it logs msg=attached, with the time that took from the launch.
func startTracing(ctx context.Context, memtrace string, args ...string) (*tracing, time.Duration, error) {
	t := &tracing{cmd: command(ctx, memtrace, args...), drained: make(chan struct{})}
	pipe, err := t.cmd.StderrPipe()
	if err != nil {
		return nil, 0, fmt.Errorf("start memtrace: %w", err)
	}
	start := time.Now()
	if err := t.cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start memtrace: %w", err)
	}
	lines := bufio.NewReader(pipe)
	var seen []string
	for {
		line, err := lines.ReadString('\n')
		if strings.Contains(line, "msg=attached") {
			break
		}
		seen = append(seen, strings.TrimSpace(line))
		if err != nil {
			t.kill()
			return nil, 0, fmt.Errorf("memtrace ended before attaching%s", tail(strings.Join(seen, "\n")))
		}
	}
	took := time.Since(start)
	go func() {
		sc := bufio.NewScanner(lines)
		for sc.Scan() {
			t.mu.Lock()
			if t.stderr.Len() < 64<<10 {
				t.stderr.WriteString(sc.Text() + "\n")
			}
			t.mu.Unlock()
		}
		close(t.drained)
	}()
	return t, took, nil
}

// wait waits for memtrace to end by itself (its targets exited), within ctx.
func (t *tracing) wait(ctx context.Context) error {
	select {
	case <-t.drained:
	case <-ctx.Done():
		t.kill()
		return fmt.Errorf("memtrace did not end after its target: %w", ctx.Err())
	}
	t.waited = true
	if err := t.cmd.Wait(); err != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Errorf("memtrace: %w%s", err, tail(t.stderr.String()))
	}
	return nil
}

// interrupt ends memtrace as Ctrl-C would (final report) and waits for it.
func (t *tracing) interrupt(ctx context.Context) error {
	if err := t.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("interrupt memtrace: %w", err)
	}
	return t.wait(ctx)
}

// kill ends memtrace at once unless it was already waited for.
func (t *tracing) kill() {
	if t.waited {
		return
	}
	killGroup(t.cmd)
	_ = t.cmd.Wait()
	t.waited = true
}
