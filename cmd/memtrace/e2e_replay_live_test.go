package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReplayEqualsLive: a replay prints what the live run printed, every
// report of it, in text and in NDJSON: a whole-host run's batches of
// exited processes and its final report (with --heap, and resident memory
// only, the default), and a -f run's report of each process at its exit
// (with its leak check).
func TestReplayEqualsLive(t *testing.T) {
	needBPF(t)
	for _, format := range []string{"json", "text"} {
		t.Run("host "+format, func(t *testing.T) {
			bin := fixture(t, "hostproc.c")
			root := chrootWithOwnLibc(t, bin, "mt-replaylive")
			rec := filepath.Join(t.TempDir(), "host.rec")
			h := startHost(t, "--comm", "mt-replaylive", "--sample-bytes", "0", "--record", rec, "--json="+boolFlag(format == "json"))
			first := exec.Command("chroot", root, "/mt-replaylive", "-1", "3")
			h.startProbed(t, first)
			if err := first.Wait(); err != nil {
				t.Fatal(err)
			}
			h.waitExitsHeld(t, first.Process.Pid)
			if out, err := exec.Command("chroot", root, "/mt-replaylive", "200", "5").CombinedOutput(); err != nil {
				t.Fatalf("fixture: %v %s", err, out)
			}
			h.cmd.Process.Signal(syscall.SIGINT)
			if err := h.cmd.Wait(); err != nil {
				t.Fatalf("memtrace: %v\n%s", err, h.errors())
			}
			live := h.stdout.String()
			r := replayIn(t, format, rec)
			// Both processes' final records.
			if n := strings.Count(live, "mt-replaylive"); n < 2 {
				t.Errorf("the live run shows the fixture %d times, want 2 at least:\n%s", n, live)
			}
			sameOutput(t, format, r.stdout, live)
		})
		// The whole host's default: resident memory only, no allocator.
		t.Run("host resident "+format, func(t *testing.T) {
			bin := fixture(t, "hostproc.c")
			root := chrootWithOwnLibc(t, bin, "mt-replayres")
			rec := filepath.Join(t.TempDir(), "resident.rec")
			h := startHostWith(t, "--comm", "mt-replayres", "--record", rec, "--json="+boolFlag(format == "json"))
			fx := exec.Command("chroot", root, "/mt-replayres", "200", "5")
			if out, err := fx.CombinedOutput(); err != nil {
				t.Fatalf("fixture: %v %s", err, out)
			}
			// Its exit handled: held for the final batch if it had a
			// sampled fault, or dropped with no record.
			h.waitExitsHandled(t, fx.Process.Pid)
			h.cmd.Process.Signal(syscall.SIGINT)
			if err := h.cmd.Wait(); err != nil {
				t.Fatalf("memtrace: %v\n%s", err, h.errors())
			}
			r := replayIn(t, format, rec)
			sameOutput(t, format, r.stdout, h.stdout.String())
		})
		t.Run("follow "+format, func(t *testing.T) {
			bin := fixture(t, "leak/fork.c")
			rec := filepath.Join(t.TempDir(), "fork.rec")
			args := []string{"-f", "--top", "0", "--record", rec}
			if format == "json" {
				args = append(args, "--json")
			}
			live := runMemtrace(t, append(args, "--", bin)...)
			if live.code != 0 {
				t.Fatalf("exit %d\n%s", live.code, live.stderr)
			}
			args = []string{"replay", "--top", "0", rec}
			if format == "json" {
				args = append(args, "--json")
			}
			r := runMemtrace(t, args...)
			if r.code != 0 {
				t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
			}
			// The child's final report at its exit, then the parent's.
			if n := finalReports(format, live.stdout); n != 2 {
				t.Errorf("the live run printed %d final reports, want 2:\n%s", n, live.stdout)
			}
			sameOutput(t, format, r.stdout, live.stdout)
		})
	}
}

// replayIn replays rec in format ("json" or "text") and fails unless the
// replay succeeds.
func replayIn(t *testing.T, format, rec string) result {
	t.Helper()
	args := []string{"replay", rec}
	if format == "json" {
		args = append(args, "--json")
	}
	r := runMemtrace(t, args...)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	return r
}

func boolFlag(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// finalReports counts the final reports in out.
func finalReports(format, out string) int {
	n := 0
	for l := range strings.Lines(out) {
		if format == "json" && strings.HasPrefix(l, `{"type":"report"`) && strings.Contains(l, `"final":true`) ||
			format == "text" && strings.Contains(l, "FINAL report") {
			n++
		}
	}
	return n
}

// sameOutput compares a replay's output with the live run's: NDJSON
// record by record (normalized), text line by line.
func sameOutput(t *testing.T, format, replay, live string) {
	t.Helper()
	if format == "json" {
		replay, live = strip(t, replay), strip(t, live)
	}
	if replay != live {
		t.Errorf("replay differs from the live run\nreplay:\n%s\nlive:\n%s", replay, live)
	}
}
