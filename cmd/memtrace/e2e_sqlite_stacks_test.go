package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/allocator"
)

// TestSqliteStacksAgreeWithHeaptrack: with --detail, memtrace unwinds the
// stacks of Debian's sqlite3 (no frame pointers anywhere) as heaptrack
// does: at least 99% of the allocation calls have a stack that reaches
// __libc_start_call_main, as heaptrack's do, and the named functions of
// heaptrack's busiest stacks are on memtrace's busiest stacks (memtrace
// leaves out the wrapper frames below the charged call, heaptrack keeps
// them).
func TestSqliteStacksAgreeWithHeaptrack(t *testing.T) {
	needBPF(t)
	for _, tool := range []string{"sqlite3", "heaptrack", "heaptrack_print"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is missing: .ci/run must install sqlite3 and heaptrack", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	workload, err := filepath.Abs(filepath.Join("..", "..", "testdata", "sqlite", "workload.sql"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"-batch", ":memory:", ".read '" + workload + "'"}

	// memtrace: calls per stack, and whether each reaches the entry.
	report := filepath.Join(dir, "memtrace.ndjson")
	r := runMemtrace(t, append([]string{"--json", "--detail", "--stack-depth", "64", "--top", "0", "-o", report, "--", "sqlite3"}, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	type stack struct {
		calls uint64
		funcs []string
	}
	var ours []stack
	var calls, reach uint64
	for _, s := range parseNDJSON(t, string(b)).sites {
		if s.Category != "heap" {
			continue
		}
		var st stack
		st.calls = s.Allocs
		for _, f := range s.Stack {
			st.funcs = append(st.funcs, f.Function)
		}
		calls += s.Allocs
		if slices.Contains(st.funcs, "__libc_start_call_main") {
			reach += s.Allocs
		}
		ours = append(ours, st)
	}

	// heaptrack's folded stacks (root first), weighted by calls.
	ht := exec.Command("heaptrack", append([]string{"-o", filepath.Join(dir, "ht"), "sqlite3"}, args...)...)
	if out, err := ht.CombinedOutput(); err != nil {
		t.Fatalf("heaptrack: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ht.*"))
	if len(files) != 1 {
		t.Fatalf("heaptrack data files: %v", files)
	}
	folded := filepath.Join(dir, "ht.folded")
	if out, err := exec.Command("heaptrack_print", "--flamegraph-cost-type", "allocations", "-F", folded, files[0]).CombinedOutput(); err != nil {
		t.Fatalf("heaptrack_print: %v\n%s", err, out)
	}
	var theirs []stack
	var htCalls, htReach uint64
	f, err := os.Open(folded)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		i := strings.LastIndexByte(sc.Text(), ' ')
		n, err := strconv.ParseUint(sc.Text()[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", sc.Text())
		}
		var st stack
		st.calls = n
		for _, fr := range strings.Split(sc.Text()[:i], ";") {
			name, _, _ := strings.Cut(fr, " (") // "fn (file.c)"
			st.funcs = append(st.funcs, name)
		}
		htCalls += n
		if slices.Contains(st.funcs, "__libc_start_call_main") {
			htReach += n
		}
		theirs = append(theirs, st)
	}
	t.Logf("memtrace: %d calls, %.4f reach __libc_start_call_main; heaptrack: %d calls, %.4f", calls, float64(reach)/float64(calls), htCalls, float64(htReach)/float64(htCalls))
	// heaptrack's preload adds libstdc++'s 72704-byte pool: one call more.
	if htCalls != calls+1 {
		t.Errorf("heaptrack counts %d calls, memtrace %d (want one less: heaptrack's libstdc++ pool)", htCalls, calls)
	}
	if float64(reach) < 0.99*float64(calls) {
		t.Errorf("%d of %d calls have a stack reaching __libc_start_call_main, want >= 99%%", reach, calls)
	}

	// The named, non-wrapper functions of heaptrack's 5 busiest stacks are
	// all on memtrace's 10 busiest.
	byCalls := func(s []stack) { sort.Slice(s, func(i, j int) bool { return s[i].calls > s[j].calls }) }
	byCalls(ours)
	byCalls(theirs)
	onOurs := map[string]bool{}
	for _, st := range ours[:min(10, len(ours))] {
		for _, fn := range st.funcs {
			onOurs[fn] = true
		}
	}
	for _, st := range theirs[:min(5, len(theirs))] {
		for _, fn := range st.funcs {
			if fn == "" || strings.HasPrefix(fn, "0x") || allocator.AutoWrapper(fn) || fn == "__libc_start_main_impl" {
				continue
			}
			if !onOurs[fn] {
				t.Errorf("%s, on one of heaptrack's busiest stacks (%v), is on none of memtrace's", fn, st.funcs)
			}
		}
	}
}
