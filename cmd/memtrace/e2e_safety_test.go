package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestExceptionsUnchanged: a C++ program that catches std::bad_alloc out of
// operator new, and an exception its new_handler throws through operator
// new, prints the same and exits with the same status traced as untraced:
// under a command (--), attached to it (-p), and with the whole host
// traced. memtrace places no return probe on anything an exception can
// unwind through (see docs/architecture.md, "What memtrace probes").
func TestExceptionsUnchanged(t *testing.T) {
	needBPF(t)
	bin := fixtureCXX(t, "badalloc.cc")
	const wantOut = "caught std::bad_alloc\ncaught the new_handler's exception\nnothrow new returned null\n"
	const wantCode = 3

	untraced := exec.Command(bin)
	out, err := untraced.Output()
	if code := exitCode(t, err); string(out) != wantOut || code != wantCode {
		t.Fatalf("untraced: %q, exit %d; want %q, exit %d", out, code, wantOut, wantCode)
	}

	t.Run("command", func(t *testing.T) {
		report := filepath.Join(t.TempDir(), "report.ndjson")
		cmd := exec.Command(memtrace(t), "--json", "-o", report, "--", bin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if code := exitCode(t, err); string(out) != wantOut || code != wantCode {
			t.Fatalf("%q, exit %d; want %q, exit %d\n%s", out, code, wantOut, wantCode, stderr.String())
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		// The one new that succeeded is charged to main, not operator new.
		rep := parseNDJSON(t, string(b))
		p := rep.finalProcess(t)
		if got := rep.byFunction(p.PID)["heap:main"]; got.Allocs != 1 || got.AllocBytes != 100 {
			t.Errorf("main: %+v, want 1 allocation of 100 bytes; sites %+v", got, rep.sites)
		}
	})

	t.Run("attached", func(t *testing.T) {
		target := exec.Command(bin, "wait")
		stdin, _ := target.StdinPipe()
		stdout, _ := target.StdoutPipe()
		if err := target.Start(); err != nil {
			t.Fatal(err)
		}
		var rest bytes.Buffer
		ready := make([]byte, 6)
		if _, err := io.ReadFull(stdout, ready); err != nil || string(ready) != "ready\n" {
			t.Fatalf("fixture said %q (%v)", ready, err)
		}
		mt := exec.Command(memtrace(t), "-v", "-o", os.DevNull, "-p", strconv.Itoa(target.Process.Pid))
		stderr, _ := mt.StderrPipe()
		if err := mt.Start(); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		waitAttached(t, stderr, &log)
		stdin.Write([]byte("go\n"))
		io.Copy(&rest, stdout)
		code := exitCode(t, target.Wait())
		mt.Wait()
		if rest.String() != wantOut || code != wantCode {
			t.Fatalf("%q, exit %d; want %q, exit %d\n%s", rest.String(), code, wantOut, wantCode, log.String())
		}
	})

	t.Run("whole host", func(t *testing.T) {
		own := filepath.Join(filepath.Dir(bin), "mt-badalloc")
		copyFile(t, bin, own)
		h := startHost(t, "--comm", "mt-badalloc")
		// It waits until memtrace has probed its libc (new to memtrace).
		cmd := exec.Command(own, "wait")
		stdin, _ := cmd.StdinPipe()
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		h.waitFor(t, "msg=probed pid="+strconv.Itoa(cmd.Process.Pid)+" ")
		stdin.Write([]byte("go\n"))
		code := exitCode(t, cmd.Wait())
		out, _ := strings.CutPrefix(stdout.String(), "ready\n")
		h.waitExitsHeld(t, cmd.Process.Pid)
		run := h.stop(t)
		if string(out) != wantOut || code != wantCode {
			t.Fatalf("%q, exit %d; want %q, exit %d\n%s", out, code, wantOut, wantCode, h.errors())
		}
		if p, ok := run.exitedRecord(cmd.Process.Pid); !ok || p.Allocs == 0 {
			t.Errorf("the program's allocations were not traced: %+v (found %v)\n%s", p, ok, h.errors())
		}
		if !strings.Contains(h.errors(), "libc.so.6") {
			t.Errorf("libc was not probed:\n%s", h.errors())
		}
	})
}

// exitCode is the status of a finished command (err from Wait, Run or Output).
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}
