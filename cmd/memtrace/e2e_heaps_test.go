package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
)

// managedHeap is one of a process record's managed_heaps.
type managedHeap struct {
	Name      string  `json:"name"`
	Reserved  uint64  `json:"reserved_bytes"`
	Committed uint64  `json:"committed_bytes"`
	Resident  *uint64 `json:"resident_bytes"`
	Source    string  `json:"source"`
}

// finalHeaps reads the managed heaps of pid's final process record.
func finalHeaps(t *testing.T, out string, pid int) map[string]managedHeap {
	t.Helper()
	for l := range strings.Lines(out) {
		var rec struct {
			Type  string        `json:"type"`
			PID   int           `json:"pid"`
			Final bool          `json:"final"`
			Heaps []managedHeap `json:"managed_heaps"`
		}
		if json.Unmarshal([]byte(l), &rec) != nil || rec.Type != "process" || rec.PID != pid || !rec.Final {
			continue
		}
		m := map[string]managedHeap{}
		for _, h := range rec.Heaps {
			m[h.Name] = h
		}
		return m
	}
	t.Fatalf("no final process record of %d in:\n%s", pid, out)
	return nil
}

// nmtMmap reads each NMT category's mmap reserved and committed bytes
// from a summary in bytes (scale=b); the Java heap's are its totals.
var (
	nmtCategoryTotals = regexp.MustCompile(`^-\s+(.+?) \(reserved=(\d+), committed=(\d+)\)`)
	nmtMmapLine       = regexp.MustCompile(`\(mmap: reserved=(\d+), committed=(\d+)\)`)
)

func nmtMmap(out string) map[string][2]uint64 {
	m := map[string][2]uint64{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if c := nmtCategoryTotals.FindStringSubmatch(l); c != nil {
			cur = c[1]
			continue
		}
		if c := nmtMmapLine.FindStringSubmatch(l); c != nil && cur != "" {
			r, _ := strconv.ParseUint(c[1], 10, 64)
			k, _ := strconv.ParseUint(c[2], 10, 64)
			m[cur] = [2]uint64{r, k}
			cur = ""
		}
	}
	return m
}

// TestJVMHeapsMatchNMT: a JVM's heaps by name, from its performance
// counters and mappings (no attach), against NMT's own summary: the Java
// heap's reservation is -Xmx and its commitment at least -Xms (pre-touched:
// resident too), and each of the Java heap, the class space (NMT's Class),
// Metaspace and the code cache (NMT's Code) is within 5% of NMT's mmap
// figures, reserved and committed.
func TestJVMHeapsMatchNMT(t *testing.T) {
	needBPF(t)
	dir := javaClasses(t)
	const xmx, xms = 256 << 20, 64 << 20
	java := exec.Command("java", "-Xmx256m", "-Xms64m", "-XX:+AlwaysPreTouch", "-XX:+UseG1GC",
		"-XX:NativeMemoryTracking=summary", "-cp", dir, "Idle")
	stdin, _ := java.StdinPipe()
	stdout, _ := java.StdoutPipe()
	if err := java.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { java.Process.Kill(); java.Wait() })
	lines := bufio.NewReader(stdout)
	expectLine(t, lines, "ready "+strconv.Itoa(java.Process.Pid))
	pid := strconv.Itoa(java.Process.Pid)
	// At rest, not frozen: a compilation may still finish. A comparison
	// that one fell into is taken again, up to three times.
	var failed string
	rec := filepath.Join(t.TempDir(), "jvm.mtrace")
	for attempt := 1; attempt <= 3; attempt++ {
		r := runMemtrace(t, "--json", "--top", "0", "-d", "500ms", "--record", rec, "-p", pid)
		if r.code != 0 {
			t.Fatalf("memtrace exit %d\n%s", r.code, r.stderr)
		}
		// A replay shows the heaps the run read.
		replayed := runMemtrace(t, "replay", "--json", "--top", "0", rec)
		if got, want := finalHeaps(t, replayed.stdout, java.Process.Pid), finalHeaps(t, r.stdout, java.Process.Pid); !reflect.DeepEqual(got, want) {
			t.Errorf("replayed heaps %+v, the run's %+v", got, want)
		}
		out, err := exec.Command("jcmd", pid, "VM.native_memory", "summary", "scale=b").CombinedOutput()
		if err != nil {
			t.Fatalf("jcmd: %v\n%s", err, out)
		}
		heaps, nmt := finalHeaps(t, r.stdout, java.Process.Pid), nmtMmap(string(out))
		var tb, fb strings.Builder
		jh := heaps["Java heap"]
		if jh.Reserved != xmx || jh.Committed < xms || jh.Resident == nil || *jh.Resident < xms || jh.Source != "hsperfdata" {
			fmt.Fprintf(&fb, "Java heap %+v (resident %v): want reserved %d, committed and resident at least %d; ", jh, jh.Resident, xmx, xms)
		}
		for _, c := range []struct{ ours, nmt string }{
			{"Java heap", "Java Heap"}, {"Class space", "Class"}, {"Metaspace", "Metaspace"}, {"Code cache", "Code"},
		} {
			h, ok := heaps[c.ours]
			want, okNMT := nmt[c.nmt]
			if !ok || !okNMT {
				fmt.Fprintf(&fb, "%s: memtrace %v, NMT %v; ", c.ours, ok, okNMT)
				continue
			}
			for i, got := range []uint64{h.Reserved, h.Committed} {
				diff := (float64(got) - float64(want[i])) / float64(max(want[i], 1)) * 100
				fmt.Fprintf(&tb, "%-12s %-9s NMT %11d  memtrace %11d  %+6.2f%%\n", c.ours, []string{"reserved", "committed"}[i], want[i], got, diff)
				if diff > 5 || diff < -5 {
					fmt.Fprintf(&fb, "%s %s: memtrace %d, NMT %d (%+.2f%%); ", c.ours, []string{"reserved", "committed"}[i], got, want[i], diff)
				}
			}
		}
		t.Logf("attempt %d:\n%s", attempt, tb.String())
		if failed = fb.String(); failed == "" {
			break
		}
		t.Logf("attempt %d: %s", attempt, failed)
	}
	if failed != "" {
		t.Error(failed)
	}
	fmt.Fprintln(stdin, "")
}

// TestV8HeapByName: node's heap, made of mmaps by V8's page allocator, is
// one "V8 heap" row of the footprint, not anon mmap call sites of the
// program's: with 100 MiB of JS objects kept, it holds at least that much
// resident.
func TestV8HeapByName(t *testing.T) {
	needBPF(t)
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v: install nodejs", err)
		}
		t.Skip(err)
	}
	script := filepath.Join(repoRoot(t), "testdata", "jit", "v8heap.js")
	// Reports go to a file; node's stdout, the pipe, gives its line.
	reports := filepath.Join(t.TempDir(), "reports.ndjson")
	mt := exec.Command(memtrace(t), "--json", "--top", "0", "-i", "300ms", "-o", reports, "--", "node", script)
	stdin, _ := mt.StdinPipe()
	stdout, _ := mt.StdoutPipe()
	var stderr strings.Builder
	mt.Stderr = &stderr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.Process.Kill() })
	// The script prints the heap's use once it keeps the objects, then
	// waits: a report begun after that line holds the heap.
	l, err := bufio.NewReader(stdout).ReadString('\n')
	n, ok := strings.CutPrefix(strings.TrimSpace(l), "kept ")
	if !ok || err != nil {
		t.Fatalf("node printed %q (%v), want kept BYTES\n%s", l, err, stderr.String())
	}
	kept, _ := strconv.ParseUint(n, 10, 64)
	done, _ := os.ReadFile(reports)
	var v8 managedHeap
	reads := 0
	// A report's reading may be an earlier one standing in (docs/json.md's
	// footprint): the wait is for one that shows the heap.
	testwait.For(t, "a report whose V8 heap holds 100 MiB resident", func() bool {
		b, _ := os.ReadFile(reports)
		if len(b) <= len(done) {
			return false
		}
		reads++
		newer := string(b[len(done):])
		// A whole report begun after the line: its report record, then
		// its process.
		i := strings.Index(newer, `{"type":"report"`)
		if i < 0 {
			return false
		}
		for l := range strings.Lines(newer[i:]) {
			var rec struct {
				Type  string        `json:"type"`
				Heaps []managedHeap `json:"managed_heaps"`
			}
			if json.Unmarshal([]byte(l), &rec) != nil || rec.Type != "process" {
				continue
			}
			for _, h := range rec.Heaps {
				if h.Name == "V8 heap" && h.Resident != nil {
					v8 = h
				}
			}
		}
		return v8.Resident != nil && *v8.Resident >= 100<<20
	})
	fmt.Fprintln(stdin, "")
	stdin.Close()
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, stderr.String())
	}
	if v8.Resident == nil {
		t.Fatalf("no V8 heap row with a resident figure after the script kept %d bytes", kept)
	}
	t.Logf("after %d reads of the reports: node's heapUsed %d; V8 heap reserved %d, committed %d, resident %d (%s)", reads, kept, v8.Reserved, v8.Committed, *v8.Resident, v8.Source)
	if kept < 100<<20 || *v8.Resident < 100<<20 || v8.Committed < *v8.Resident || v8.Reserved < v8.Committed {
		t.Errorf("V8 heap %+v resident %d with %d bytes of JS objects kept: want resident at least 100 MiB", v8, *v8.Resident, kept)
	}
}
