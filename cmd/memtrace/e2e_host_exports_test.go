package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/recording"
)

// TestHostExportsExited: processes that exit during a whole-host run are
// in the end's --pprof and --folded files, folded by comm: five runs of
// the fixture give one sample per call site (or stack, with --detail or
// sampled)
// with the allocations of all five (exact, or every block sampled),
// nothing in use, no pid, the label
// exited=true and processes=5; a sixth, still running at the end, is
// there as itself. The run is recorded: replay writes the same files,
// and replay --at a moment after the first run's exit folds that one
// alone.
func TestHostExportsExited(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "hostproc.c")
	root := chrootWithOwnLibc(t, bin, "mt-exitprof")
	for _, tc := range []struct {
		name  string
		args  []string
		stack map[string]string // function: its stack, outermost first
	}{
		{"call sites", []string{"--sample-bytes", "0"}, map[string]string{"host_leak": "host_leak", "host_churn": "host_churn"}},
		{"stacks", []string{"--sample-bytes", "0", "--detail"}, map[string]string{"host_leak": "main;host_leak", "host_churn": "main;host_churn"}},
		// Sampled mode's breakdown by stack; every block sampled, weighing 1.
		{"sampled stacks", []string{"--sample-bytes", "1"}, map[string]string{"host_leak": "main;host_leak", "host_churn": "main;host_churn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := func(name string) string { return filepath.Join(dir, name) }
			prof, fold, rec := file("host.pb.gz"), file("host.folded"), file("host.rec")
			// --resident-bytes 0: a sampled write fault of the fixture would
			// add a resident sample for host_leak, with other labels.
			h := startHost(t, append([]string{"--comm", "mt-exitprof", "--record", rec, "--resident-bytes", "0",
				"--pprof", prof, "--folded", fold, "--folded-value", "allocated"}, tc.args...)...)
			// The first waits until its libc is probed; the others wait
			// 200 ms, for memtrace to read their exec and their mappings.
			first := exec.Command("chroot", root, "/mt-exitprof", "-1", "3")
			h.startProbed(t, first)
			if err := first.Wait(); err != nil {
				t.Fatal(err)
			}
			firstGone := monotonicNS()
			// One that allocates 2 and 2, then runs until memtrace ends.
			held := exec.Command("chroot", root, "/mt-exitprof", "200", "2", "60000")
			if err := held.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { held.Process.Kill(); held.Wait() })
			time.Sleep(time.Second) // a moment between the first and the others, for replay --at
			var ran []int
			for range 4 {
				c := exec.Command("chroot", root, "/mt-exitprof", "200", "5")
				if out, err := c.CombinedOutput(); err != nil {
					t.Fatalf("fixture: %v %s", err, out)
				}
				ran = append(ran, c.Process.Pid)
			}
			h.waitExitsHeld(t, ran...)
			h.stop(t)

			// 3 + 4*5 calls each: host_leak of 1000 bytes, host_churn of 500.
			want := map[string][4]int64{"host_leak": {23, 23000, 0, 0}, "host_churn": {23, 11500, 0, 0}}
			p := readProfile(t, prof)
			got, gotHeld := map[string][4]int64{}, map[string][4]int64{}
			for _, s := range p.Sample {
				var fns []string
				for i := len(s.Location) - 1; i >= 0; i-- {
					for j := len(s.Location[i].Line) - 1; j >= 0; j-- {
						fns = append(fns, s.Location[i].Line[j].Function.Name)
					}
				}
				if len(fns) == 0 {
					continue
				}
				fn := fns[len(fns)-1]
				if _, ok := want[fn]; !ok {
					continue // the C runtime's own allocations, if any
				}
				if st := strings.Join(fns, ";"); !strings.HasSuffix(st, tc.stack[fn]) || (tc.stack[fn] == fn && st != fn) {
					t.Errorf("%s: stack %s, want %s", fn, st, tc.stack[fn])
				}
				if l := s.Location[0]; l.Mapping == nil || l.Mapping.File != filepath.Join(root, "mt-exitprof") && l.Mapping.File != "/mt-exitprof" {
					t.Errorf("%s: mapping %+v, want the fixture", fn, l.Mapping)
				}
				if pid := s.NumLabel["pid"]; len(pid) == 1 && pid[0] == int64(held.Process.Pid) {
					addValues(gotHeld, fn, s.Value)
					continue
				}
				if s.Label["comm"][0] != "mt-exitprof" || s.Label[pprofout.ExitedLabel][0] != "true" ||
					s.NumLabel["pid"] != nil || s.NumLabel[pprofout.ExitedCount][0] != 5 {
					t.Errorf("%s: labels %v %v, want comm mt-exitprof, exited true, processes 5, no pid", fn, s.Label, s.NumLabel)
				}
				addValues(got, fn, s.Value)
			}
			for fn, w := range want {
				if got[fn] != w {
					t.Errorf("%s: %v, want %v", fn, got[fn], w)
				}
			}
			for fn, w := range map[string][4]int64{"host_leak": {2, 2000, 2, 2000}, "host_churn": {2, 1000, 0, 0}} {
				if gotHeld[fn] != w {
					t.Errorf("running %s: %v, want %v", fn, gotHeld[fn], w)
				}
			}
			b, err := os.ReadFile(fold)
			if err != nil {
				t.Fatal(err)
			}
			for fn, w := range want {
				line := tc.stack[fn] + " " + strconv.FormatInt(w[1], 10) + "\n"
				if !strings.Contains(string(b), line) {
					t.Errorf("folded stacks lack %q:\n%s", line, b)
				}
			}

			// Replay: the same files.
			if r := runMemtrace(t, "replay", "--pprof", file("replay.pb.gz"), "--folded", file("replay.folded"),
				"--folded-value", "allocated", rec); r.code != 0 {
				t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
			}
			if got, want := profileSamples(t, file("replay.pb.gz")), profileSamples(t, prof); got != want {
				t.Errorf("replay --pprof:\n%s\nlive:\n%s", got, want)
			}
			if rf, err := os.ReadFile(file("replay.folded")); err != nil || string(rf) != string(b) {
				t.Errorf("replay --folded (%v):\n%s\nlive:\n%s", err, rf, b)
			}

			// Replay --at half a second after the first run's exit: it
			// alone is folded.
			at := time.Duration(firstGone-recordingStart(t, rec)) + 500*time.Millisecond
			if r := runMemtrace(t, "replay", "--at", at.String(), "--pprof", file("at.pb.gz"), rec); r.code != 0 {
				t.Fatalf("replay --at: exit %d\n%s", r.code, r.stderr)
			}
			got = map[string][4]int64{}
			for _, s := range readProfile(t, file("at.pb.gz")).Sample {
				if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Label[pprofout.ExitedLabel] == nil {
					continue // the running one's, if it allocated by then
				}
				if fn := s.Location[0].Line[0].Function.Name; want[fn] != [4]int64{} {
					if n := s.NumLabel[pprofout.ExitedCount]; len(n) != 1 || n[0] != 1 {
						t.Errorf("--at %s: %s processes %v, want 1", at, fn, n)
					}
					addValues(got, fn, s.Value)
				}
			}
			for fn, w := range map[string][4]int64{"host_leak": {3, 3000, 0, 0}, "host_churn": {3, 1500, 0, 0}} {
				if got[fn] != w {
					t.Errorf("--at %s: %s %v, want %v", at, fn, got[fn], w)
				}
			}
		})
	}
}

// profileSamples lists a --pprof file's samples, sorted, each with its
// values, labels and locations (address, mapping, functions): all but
// the time fields.
func profileSamples(t *testing.T, path string) string {
	t.Helper()
	var out []string
	for _, s := range readProfile(t, path).Sample {
		var b strings.Builder
		fmt.Fprintf(&b, "%v", s.Value)
		for _, k := range slices.Sorted(maps.Keys(s.Label)) {
			fmt.Fprintf(&b, " %s=%v", k, s.Label[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.NumLabel)) {
			fmt.Fprintf(&b, " %s=%v", k, s.NumLabel[k])
		}
		for _, l := range s.Location {
			fmt.Fprintf(&b, " | %#x", l.Address)
			if l.Mapping != nil {
				fmt.Fprintf(&b, " %s+%#x@%#x", l.Mapping.File, l.Mapping.Offset, l.Mapping.Start)
			}
			for _, ln := range l.Line {
				fmt.Fprintf(&b, " %s:%s:%d", ln.Function.Name, ln.Function.Filename, ln.Line)
			}
		}
		out = append(out, b.String())
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// recordingStart is the kernel monotonic time (ns) a recording started at.
func recordingStart(t *testing.T, path string) uint64 {
	t.Helper()
	r, err := recording.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Info().StartNS
}

// monotonicNS is the kernel monotonic clock (ns), the clock of event times.
func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// startProbed starts c, a fixture run with wait -1, and lets it allocate
// once memtrace has probed its allocator.
func (h *hostRun) startProbed(t *testing.T, c *exec.Cmd) {
	t.Helper()
	start, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "msg=probed pid="+strconv.Itoa(c.Process.Pid)+" ")
	start.Write([]byte{1})
	start.Close()
}

// addValues adds a sample's four values to m[k].
func addValues(m map[string][4]int64, k string, values []int64) {
	v := m[k]
	for i := range v {
		v[i] += values[i]
	}
	m[k] = v
}
