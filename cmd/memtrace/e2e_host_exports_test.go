package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/pprofout"
)

// TestHostExportsExited: processes that exit during a whole-host run are
// in the end's --pprof and --folded files, folded by comm: five runs of
// the fixture give one sample per call site (or stack, with --detail or
// sampled)
// with the allocations of all five (exact, or every block sampled),
// nothing in use, no pid, the label
// exited=true and processes=5.
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
			prof, fold := filepath.Join(dir, "host.pb.gz"), filepath.Join(dir, "host.folded")
			h := startHost(t, append([]string{"--comm", "mt-exitprof",
				"--pprof", prof, "--folded", fold, "--folded-value", "allocated"}, tc.args...)...)
			// The first waits until its libc is probed; the others wait
			// 200 ms, for memtrace to read their exec and their mappings.
			first := exec.Command("chroot", root, "/mt-exitprof", "-1", "3")
			h.startProbed(t, first)
			if err := first.Wait(); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if out, err := exec.Command("chroot", root, "/mt-exitprof", "200", "5").CombinedOutput(); err != nil {
					t.Fatalf("fixture: %v %s", err, out)
				}
			}
			time.Sleep(1500 * time.Millisecond) // the exits' batch is written within a second
			h.stop(t)

			// 3 + 4*5 calls each: host_leak of 1000 bytes, host_churn of 500.
			want := map[string][4]int64{"host_leak": {23, 23000, 0, 0}, "host_churn": {23, 11500, 0, 0}}
			p := readProfile(t, prof)
			got := map[string][4]int64{}
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
				if s.Label["comm"][0] != "mt-exitprof" || s.Label[pprofout.ExitedLabel][0] != "true" ||
					s.NumLabel["pid"] != nil || s.NumLabel[pprofout.ExitedCount][0] != 5 {
					t.Errorf("%s: labels %v %v, want comm mt-exitprof, exited true, processes 5, no pid", fn, s.Label, s.NumLabel)
				}
				if l := s.Location[0]; l.Mapping == nil || l.Mapping.File != filepath.Join(root, "mt-exitprof") && l.Mapping.File != "/mt-exitprof" {
					t.Errorf("%s: mapping %+v, want the fixture", fn, l.Mapping)
				}
				addValues(got, fn, s.Value)
			}
			for fn, w := range want {
				if got[fn] != w {
					t.Errorf("%s: %v, want %v", fn, got[fn], w)
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
		})
	}
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
	h.waitFor(t, "msg=probed pid="+strconv.Itoa(c.Process.Pid)+" ", 30*time.Second)
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
