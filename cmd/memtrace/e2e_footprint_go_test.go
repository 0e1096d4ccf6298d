package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// goFootprint is the footprint of a Go program as NDJSON has it.
type goFootprint struct {
	RSS               uint64 `json:"rss_bytes"`
	RSSAnon           uint64 `json:"rss_anon_bytes"`
	HeapResident      uint64 `json:"heap_resident_bytes"`
	AnonResident      uint64 `json:"anon_resident_bytes"`
	StackResident     uint64 `json:"stack_resident_bytes"`
	FileResident      uint64 `json:"file_resident_bytes"`
	Unexplained       uint64 `json:"unexplained_bytes"`
	GoHeapReserved    uint64 `json:"go_heap_reserved_bytes"`
	GoHeapCommitted   uint64 `json:"go_heap_committed_bytes"`
	GoHeapResident    uint64 `json:"go_heap_resident_bytes"`
	GoHeapSource      string `json:"go_heap_source"`
	GoRuntimeResident uint64 `json:"go_runtime_resident_bytes"`
}

// goMemStats are the runtime's figures the Go fixture prints (MEMSTATS).
type goMemStats struct{ sys, inuse, released, stacks uint64 }

// parseGoRun reads the final process record's footprint and the fixture's
// memstats line from a run's stdout.
func parseGoRun(t *testing.T, out string) (f goFootprint, ms goMemStats) {
	t.Helper()
	found := false
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "heap_sys ") {
			fmt.Sscanf(l, "heap_sys %d heap_inuse %d heap_released %d stack_inuse %d", &ms.sys, &ms.inuse, &ms.released, &ms.stacks)
		}
		var rec struct {
			Type      string      `json:"type"`
			Final     bool        `json:"final"`
			Footprint goFootprint `json:"footprint"`
		}
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &rec) == nil && rec.Type == "process" && rec.Final {
			f, found = rec.Footprint, true
		}
	}
	if !found || ms.sys == 0 {
		t.Fatalf("no final process record or no memstats line:\n%s", out)
	}
	return f, ms
}

// checkGoFootprint: the Go heap is found from the runtime's own list; its
// resident bytes are at least what the runtime's spans hold in use, less
// 64 pages (every page of the 192 MiB kept was written), and at most what it has not given
// back; it is nearly all of RssAnon; the arenas are whole and commit at
// least what the runtime says it mapped; and the parts add up to the RSS
// with less than 1% unexplained. (The runtime's figures are taken a
// moment before the reading, so ranges, not equalities.)
// A cgo program's runtime maps its metadata through libc's mmap, traced:
// that is mmap (a few MiB at most), and glibc's heap holds a few blocks.
// drift: how far the parts may add up past the RSS; 0 at an exit stop,
// a few pages for a running process (the runtime's background work may
// touch a page between status and smaps).
func checkGoFootprint(t *testing.T, f goFootprint, ms goMemStats, cgo bool, drift uint64) {
	t.Helper()
	t.Logf("footprint %+v; runtime %+v", f, ms)
	if f.GoHeapSource != "runtime" {
		t.Errorf("go_heap_source %q, want runtime", f.GoHeapSource)
	}
	if f.GoHeapReserved%(64<<20) != 0 || f.GoHeapCommitted < ms.sys+ms.stacks || f.GoHeapCommitted > f.GoHeapReserved {
		t.Errorf("go heap reserved %d committed %d: want whole 64 MiB arenas, HeapSys+StackInuse %d committed",
			f.GoHeapReserved, f.GoHeapCommitted, ms.sys+ms.stacks)
	}
	// In-use spans may hold pages never written (a fresh span's unused
	// tail, the unused bottom of a stack): up to 64 pages below in use.
	// With huge pages "always", a fault makes the rest of its huge page
	// resident, pages the runtime counts as released (goHeapSlack).
	inuse, unreleased := ms.inuse+ms.stacks-64*4096, ms.sys-ms.released+ms.stacks+uint64(goHeapSlack(t))
	if f.GoHeapResident < inuse || f.GoHeapResident > unreleased || f.GoHeapResident < 192<<20 {
		t.Errorf("go_heap_resident_bytes %d, want the 192 MiB kept, from in use less 64 pages %d to unreleased %d",
			f.GoHeapResident, inuse, unreleased)
	}
	if f.GoHeapResident < f.RSSAnon-f.RSSAnon/50 {
		t.Errorf("go heap resident %d is less than 98%% of RssAnon %d", f.GoHeapResident, f.RSSAnon)
	}
	switch {
	case !cgo && (f.HeapResident != 0 || f.AnonResident != 0):
		t.Errorf("heap %d, mmap %d: a static Go program has neither", f.HeapResident, f.AnonResident)
	case cgo && (f.HeapResident > 1<<20 || f.AnonResident > 4<<20 || f.GoRuntimeResident > 1<<20):
		t.Errorf("heap %d, mmap %d, go runtime %d: a cgo program's runtime maps through libc (mmap), its heap is not glibc's",
			f.HeapResident, f.AnonResident, f.GoRuntimeResident)
	}
	sum := f.HeapResident + f.AnonResident + f.GoHeapResident + f.GoRuntimeResident + f.StackResident + f.FileResident + f.Unexplained
	if sum < f.RSS || sum > f.RSS+drift || f.Unexplained > f.RSS/100 {
		t.Errorf("parts add up to %d, rss %d (%d bytes of drift allowed); unexplained %d: want at most 1%%",
			sum, f.RSS, drift, f.Unexplained)
	}
}

// TestFootprintGoProgram: a Go program's heap, traced with `--` (read at
// its exit stop; recorded, its replay shows the same Go figures) and with
// -p (read in the final report while it waits); and a cgo build of it,
// whose runtime maps its heap through libc's mmap (traced: those regions
// are mmap call sites, their bytes the Go heap's, not counted twice).
func TestFootprintGoProgram(t *testing.T) {
	needBPF(t)
	bin := goFixture(t)
	t.Run("command", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "run.rec")
		f, ms := runGoCommand(t, bin, "--record", rec)
		checkGoFootprint(t, f, ms, false, 0)
		replayed := runMemtrace(t, "replay", rec, "--json")
		if replayed.code != 0 {
			t.Fatalf("replay exit %d\n%s", replayed.code, replayed.stderr)
		}
		if rf, _ := parseGoRun(t, replayed.stdout+"heap_sys 1\n"); rf != f {
			t.Errorf("replayed footprint %+v, live %+v", rf, f)
		}
	})
	t.Run("pid", func(t *testing.T) {
		target := exec.Command(bin)
		target.Env = append(os.Environ(), "WAIT=1", "MEMSTATS=1")
		stdin, _ := target.StdinPipe()
		stdout, _ := target.StdoutPipe()
		if err := target.Start(); err != nil {
			t.Fatal(err)
		}
		defer target.Wait()
		defer stdin.Close()
		lines := bufio.NewReader(stdout)
		expectLine(t, lines, "waiting")
		mt, out, log := startAttached(t, target.Process.Pid, "--json")
		io.WriteString(stdin, "go\n")
		expectLine(t, lines, "ready")
		stats, err := lines.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		mt.Process.Signal(syscall.SIGINT)
		if err := mt.Wait(); err != nil {
			t.Fatalf("memtrace: %v\n%s", err, log.String())
		}
		f, ms := parseGoRun(t, out.String()+stats)
		checkGoFootprint(t, f, ms, false, 16*4096)
	})
	t.Run("cgo", func(t *testing.T) {
		bin := filepath.Join(binDir, "resident_go_cgo")
		build := exec.Command("go", "build", "-tags", "cgofixture", "-o", bin, ".")
		build.Dir = filepath.Join("..", "..", "testdata", "resident_go")
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		f, ms := runGoCommand(t, bin)
		checkGoFootprint(t, f, ms, true, 0)
	})
}

// runGoCommand runs `memtrace --json args -- bin` with the fixture
// printing its MemStats.
func runGoCommand(t *testing.T, bin string, args ...string) (goFootprint, goMemStats) {
	t.Helper()
	cmd := exec.Command(memtrace(t), append(append([]string{"--json"}, args...), "--", bin)...)
	cmd.Env = append(os.Environ(), "MEMSTATS=1")
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	return parseGoRun(t, r.stdout)
}
