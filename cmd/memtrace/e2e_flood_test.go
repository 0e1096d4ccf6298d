package main

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFloodEndsOnTime: with the ring never empty (two threads calling
// malloc and free without pause), -d and SIGINT still end a -p run, with
// its final report: the reader's poll hands over a bounded batch, then
// serves the run's timers and signals (tracer.MaxBatch). The bounds are
// generous: this is no speed target, only "it ends".
func TestFloodEndsOnTime(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "flood.c", "-pthread")
	for _, tc := range []struct {
		name   string
		args   []string
		signal bool
	}{
		{"duration", []string{"-d", "2s"}, false},
		{"detail", []string{"--detail", "-d", "2s"}, false},
		{"sigint", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flood := exec.Command(bin)
			out, err := flood.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := flood.Start(); err != nil {
				t.Fatal(err)
			}
			defer flood.Wait()
			defer flood.Process.Kill()
			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
				t.Fatalf("flood said %q", line)
			}
			pid := flood.Process.Pid
			mt := exec.Command(memtrace(t), append([]string{"--json", "-v", "-p", strconv.Itoa(pid)}, tc.args...)...)
			var stdout strings.Builder
			var stderr syncBuffer
			mt.Stdout = &stdout
			errPipe, err := mt.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := mt.Start(); err != nil {
				t.Fatal(err)
			}
			// Attached (however long that takes on a loaded machine): the
			// flood's allocations reach the ring from now on.
			waitAttached(t, errPipe, &stderr)
			done := make(chan error, 1)
			go func() { done <- mt.Wait() }()
			var ended time.Time
			if tc.signal {
				ended = time.Now()
				mt.Process.Signal(syscall.SIGINT)
			} else {
				ended = start.Add(2 * time.Second)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("memtrace: %v\n%s", err, stderr.String())
				}
			case <-time.After(60 * time.Second):
				mt.Process.Kill()
				t.Fatalf("memtrace still running 60 s after the flood began; stderr:\n%s", stderr.String())
			}
			if late := time.Since(ended); late > 20*time.Second {
				t.Errorf("ended %v after it should have", late)
			}
			p := parseNDJSON(t, stdout.String()).finalProcess(t)
			if p.PID != pid || p.Allocs == 0 {
				t.Errorf("final record %+v: want pid %d with allocations", p, pid)
			}
		})
	}
}
