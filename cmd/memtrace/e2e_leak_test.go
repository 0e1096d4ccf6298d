package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// leakFigures are a leak check's bytes and blocks per class, as valgrind's
// LEAK SUMMARY prints them and memtrace's NDJSON carries them.
type leakFigures struct {
	DefinitelyLostBytes  uint64 `json:"definitely_lost_bytes"`
	DefinitelyLostBlocks uint64 `json:"definitely_lost_blocks"`
	IndirectlyLostBytes  uint64 `json:"indirectly_lost_bytes"`
	IndirectlyLostBlocks uint64 `json:"indirectly_lost_blocks"`
	PossiblyLostBytes    uint64 `json:"possibly_lost_bytes"`
	PossiblyLostBlocks   uint64 `json:"possibly_lost_blocks"`
	ReachableBytes       uint64 `json:"reachable_bytes"`
	ReachableBlocks      uint64 `json:"reachable_blocks"`
	SuppressedBytes      uint64 `json:"suppressed_bytes"`
	SuppressedBlocks     uint64 `json:"suppressed_blocks"`
}

func (f leakFigures) String() string {
	return fmt.Sprintf("definite %d/%d indirect %d/%d possible %d/%d reachable %d/%d suppressed %d/%d",
		f.DefinitelyLostBytes, f.DefinitelyLostBlocks, f.IndirectlyLostBytes, f.IndirectlyLostBlocks,
		f.PossiblyLostBytes, f.PossiblyLostBlocks, f.ReachableBytes, f.ReachableBlocks,
		f.SuppressedBytes, f.SuppressedBlocks)
}

// lostOnly drops what valgrind and memtrace count differently by design:
// suppressed blocks (valgrind frees the runtime's own at exit).
func (f leakFigures) classes() leakFigures {
	f.SuppressedBytes, f.SuppressedBlocks = 0, 0
	return f
}

// leakProcess is a final process record with its leak fields.
type leakProcess struct {
	Type        string `json:"type"`
	PID         int    `json:"pid"`
	Comm        string `json:"comm"`
	Final       bool   `json:"final"`
	LiveBytes   uint64 `json:"live_bytes"`
	LeakChecked bool   `json:"leak_checked"`
	leakFigures
}

type leakSite struct {
	Type     string `json:"type"`
	PID      int    `json:"pid"`
	Category string `json:"category"`
	Function string `json:"function"`
	Line     int    `json:"line"`
	Final    bool   `json:"final"`
	leakFigures
}

// leakRecords parses the final process and heap callsite records.
func leakRecords(t *testing.T, out string) (procs []leakProcess, sites []leakSite) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var head struct {
			Type  string `json:"type"`
			Final bool   `json:"final"`
		}
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		if !head.Final {
			continue
		}
		switch head.Type {
		case "process":
			var p leakProcess
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, p)
		case "callsite":
			var s leakSite
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			if s.Category == "heap" {
				sites = append(sites, s)
			}
		}
	}
	return procs, sites
}

// needValgrind returns valgrind's path; it skips without it, except in CI.
func needValgrind(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("valgrind")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but valgrind is not installed (apt-get install valgrind)")
		}
		t.Skip("valgrind is not installed")
	}
	return p
}

var (
	summaryLine = regexp.MustCompile(`^==(\d+)==\s+(definitely lost|indirectly lost|possibly lost|still reachable|suppressed): ([\d,]+) bytes in ([\d,]+) blocks`)
	noLeaksLine = regexp.MustCompile(`^==(\d+)== All heap blocks were freed -- no leaks are possible`)
)

// valgrindLeaks runs valgrind --leak-check=full on argv and returns each
// process's LEAK SUMMARY by PID, in the order they were printed.
func valgrindLeaks(t *testing.T, argv ...string) (map[int]leakFigures, []int) {
	t.Helper()
	vg := needValgrind(t)
	args := append([]string{"--leak-check=full", "--show-leak-kinds=all"}, argv...)
	var stderr strings.Builder
	for attempt := 1; ; attempt++ {
		stderr.Reset()
		cmd := exec.Command(vg, args...)
		cmd.Stderr = &stderr
		cmd.Stdout = io.Discard
		err := cmd.Run()
		if err == nil {
			break
		}
		// valgrind runs the code as it finds it in memory: a uprobe that
		// another tracer placed without a PID filter (a whole-host
		// memtrace, bpftrace) is an int3 to it, and kills it with SIGTRAP.
		// Such tracers come and go (other tests): wait for them.
		if strings.Contains(stderr.String(), "signal 5 (SIGTRAP)") && attempt < 20 {
			time.Sleep(3 * time.Second)
			continue
		}
		t.Fatalf("valgrind %v: %v (a SIGTRAP means another tracer's uprobes are in the code)\n%s", args, err, stderr.String())
	}
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64)
		if err != nil {
			t.Fatalf("valgrind number %q", s)
		}
		return n
	}
	out := map[int]leakFigures{}
	var order []int
	for _, l := range strings.Split(stderr.String(), "\n") {
		if m := noLeaksLine.FindStringSubmatch(l); m != nil {
			pid, _ := strconv.Atoi(m[1])
			out[pid] = leakFigures{}
			order = append(order, pid)
			continue
		}
		m := summaryLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		f, seen := out[pid]
		if !seen {
			order = append(order, pid)
		}
		b, n := num(m[3]), num(m[4])
		switch m[2] {
		case "definitely lost":
			f.DefinitelyLostBytes, f.DefinitelyLostBlocks = b, n
		case "indirectly lost":
			f.IndirectlyLostBytes, f.IndirectlyLostBlocks = b, n
		case "possibly lost":
			f.PossiblyLostBytes, f.PossiblyLostBlocks = b, n
		case "still reachable":
			f.ReachableBytes, f.ReachableBlocks = b, n
		case "suppressed":
			f.SuppressedBytes, f.SuppressedBlocks = b, n
		}
		out[pid] = f
	}
	if len(out) == 0 {
		t.Fatalf("no LEAK SUMMARY in valgrind's output:\n%s", stderr.String())
	}
	return out, order
}

// siteWant is what each fixture function's blocks must be.
type siteWant map[string]leakFigures

// checkSites sums the final heap sites of pid by function and compares them
// with want (functions absent from want must hold nothing live).
func checkSites(t *testing.T, sites []leakSite, pid int, want siteWant, lines map[string]int) {
	t.Helper()
	got := map[string]leakFigures{}
	for _, s := range sites {
		if s.PID != pid {
			continue
		}
		g := got[s.Function]
		g.DefinitelyLostBytes += s.DefinitelyLostBytes
		g.DefinitelyLostBlocks += s.DefinitelyLostBlocks
		g.IndirectlyLostBytes += s.IndirectlyLostBytes
		g.IndirectlyLostBlocks += s.IndirectlyLostBlocks
		g.PossiblyLostBytes += s.PossiblyLostBytes
		g.PossiblyLostBlocks += s.PossiblyLostBlocks
		g.ReachableBytes += s.ReachableBytes
		g.ReachableBlocks += s.ReachableBlocks
		g.SuppressedBytes += s.SuppressedBytes
		g.SuppressedBlocks += s.SuppressedBlocks
		got[s.Function] = g
		if _, listed := want[s.Function]; listed && lines != nil && !hasLine(lines, s.Line) {
			t.Errorf("%s: line %d is not a marked call site", s.Function, s.Line)
		}
	}
	for fn, w := range want {
		if got[fn] != w {
			t.Errorf("%s: got %v, want %v", fn, got[fn], w)
		}
	}
}

func hasLine(lines map[string]int, l int) bool {
	for _, v := range lines {
		if v == l {
			return true
		}
	}
	return false
}

// TestLeakCheckMatchesValgrind runs the C and C++ fixtures under valgrind
// --leak-check=full and under memtrace, and checks that memtrace's classes
// are valgrind's, byte for byte and block for block, process and call
// site.
func TestLeakCheckMatchesValgrind(t *testing.T) {
	needBPF(t)
	needValgrind(t)
	tests := []struct {
		name string
		src  string
		bin  func(t *testing.T) string
		want siteWant
		// suppressed: what memtrace suppresses by default and valgrind
		// frees before its check (libstdc++'s emergency EH pool).
		suppressed bool
	}{
		{"C", "leak/leaks.c", func(t *testing.T) string { return fixture(t, "leak/leaks.c") }, siteWant{
			"leak_dropped":  {DefinitelyLostBytes: 100, DefinitelyLostBlocks: 1},
			"leak_list":     {DefinitelyLostBytes: 32, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 128, IndirectlyLostBlocks: 4},
			"leak_interior": {PossiblyLostBytes: 64, PossiblyLostBlocks: 1},
			"keep_global":   {ReachableBytes: 200, ReachableBlocks: 1},
			"keep_chain":    {ReachableBytes: 144, ReachableBlocks: 3},
		}, false},
		{"C++", "leak/leaks.cc", func(t *testing.T) string { return fixtureCXX(t, "leak/leaks.cc") }, siteWant{
			"leak_object()":   {DefinitelyLostBytes: 40, DefinitelyLostBlocks: 1},
			"leak_tree()":     {DefinitelyLostBytes: 24, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 48, IndirectlyLostBlocks: 2},
			"leak_array()":    {DefinitelyLostBytes: 56, DefinitelyLostBlocks: 1},
			"leak_interior()": {PossiblyLostBytes: 64, PossiblyLostBlocks: 1},
			"keep_object()":   {ReachableBytes: 40, ReachableBlocks: 1},
			"keep_array()":    {ReachableBytes: 72, ReachableBlocks: 1},
			"keep_derived()":  {ReachableBytes: 40, ReachableBlocks: 1},
		}, true},
		// The README's demo: a realistic mix (11 111 live blocks, strdup
		// and asprintf through libc), process totals only.
		{"demo", "demo/leaky.c", func(t *testing.T) string { return fixture(t, "demo/leaky.c") }, siteWant{}, false},
		// A pointer in the program's own mapping, merged by the kernel
		// with an mmapped chunk's (keep_in_mapping was definitely lost).
		{"merged mappings", "leak/merged.c", func(t *testing.T) string { return fixture(t, "leak/merged.c") }, siteWant{
			"keep_in_mapping": {ReachableBytes: 100, ReachableBlocks: 1},
			"keep_big":        {ReachableBytes: 256 << 10, ReachableBlocks: 1},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := tt.bin(t)
			if tt.name == "merged mappings" {
				if out, err := exec.Command(bin).CombinedOutput(); err != nil || !strings.Contains(string(out), "merged 1") {
					t.Fatalf("the fixture's mappings did not merge (%v): %s", err, out)
				}
			}
			vg, order := valgrindLeaks(t, bin)
			want := vg[order[0]]
			if want.SuppressedBytes != 0 {
				t.Fatalf("valgrind suppressed blocks: %v", want)
			}
			r := runMemtrace(t, "--json", "--top", "0", "--", bin)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			procs, sites := leakRecords(t, r.stdout)
			if len(procs) != 1 || !procs[0].LeakChecked {
				t.Fatalf("want one checked process, got %+v\n%s", procs, r.stderr)
			}
			p := procs[0]
			t.Logf("valgrind: %v", want)
			t.Logf("memtrace: %v", p.leakFigures)
			if p.classes() != want.classes() {
				t.Errorf("memtrace %v, valgrind %v", p.leakFigures, want)
			}
			// Every live block is in one class or suppressed.
			f := p.leakFigures
			if sum := f.DefinitelyLostBytes + f.IndirectlyLostBytes + f.PossiblyLostBytes + f.ReachableBytes + f.SuppressedBytes; sum != p.LiveBytes {
				t.Errorf("classes sum to %d bytes, live_bytes is %d", sum, p.LiveBytes)
			}
			if tt.suppressed != (f.SuppressedBlocks > 0) {
				t.Errorf("suppressed %d/%d", f.SuppressedBytes, f.SuppressedBlocks)
			}
			checkSites(t, sites, p.PID, tt.want, siteLines(t, tt.src))
			// The text report gives the same LEAK SUMMARY, and valgrind's
			// heuristic breakdown.
			text := runMemtrace(t, "--raw", "--", bin)
			for _, w := range []string{
				fmt.Sprintf("definitely lost: %d bytes in %d blocks", want.DefinitelyLostBytes, want.DefinitelyLostBlocks),
				fmt.Sprintf("indirectly lost: %d bytes in %d blocks", want.IndirectlyLostBytes, want.IndirectlyLostBlocks),
				fmt.Sprintf("possibly lost: %d bytes in %d blocks", want.PossiblyLostBytes, want.PossiblyLostBlocks),
				fmt.Sprintf("still reachable: %d bytes in %d blocks", want.ReachableBytes, want.ReachableBlocks),
			} {
				if !strings.Contains(text.stdout, w) {
					t.Errorf("text report lacks %q:\n%s", w, text.stdout)
				}
			}
			if tt.name == "C++" {
				for _, w := range []string{"newarray           : 72 bytes in 1 blocks", "multipleinheritance: 40 bytes in 1 blocks"} {
					if !strings.Contains(text.stdout, w) {
						t.Errorf("text report lacks heuristic line %q:\n%s", w, text.stdout)
					}
				}
			}
		})
	}
}

// TestLsStillReachable: ls keeps what it allocated in globals; valgrind
// calls it still reachable, and so does memtrace, so --fail-on-leak passes.
func TestLsStillReachable(t *testing.T) {
	needBPF(t)
	vg, order := valgrindLeaks(t, "/bin/ls", "/")
	out := filepath.Join(t.TempDir(), "ls.ndjson")
	r := runMemtrace(t, "--fail-on-leak", "--json", "-o", out, "--", "/bin/ls", "/")
	if r.code != 0 {
		t.Fatalf("memtrace --fail-on-leak -- /bin/ls /: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := leakRecords(t, string(b))
	if len(procs) != 1 {
		t.Fatalf("processes %+v", procs)
	}
	want := vg[order[0]]
	t.Logf("valgrind: %v", want)
	t.Logf("memtrace: %v", procs[0].leakFigures)
	if procs[0].classes() != want.classes() {
		t.Errorf("memtrace %v, valgrind %v", procs[0].leakFigures, want)
	}
}

// TestFailOnLeak: the leak status, the function and line, thresholds,
// kinds, suppressions, the command's own status, CI annotations and
// --json-file.
func TestFailOnLeak(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leak/onleak.c", "-fno-omit-frame-pointer")
	line := siteLines(t, "leak/onleak.c")["leaky_function"]
	dir := t.TempDir()
	supp := filepath.Join(dir, "supp.txt")
	os.WriteFile(supp, []byte("# the known leak\nleak:leaky_function\n"), 0o644)
	suppFile := filepath.Join(dir, "supp-file.txt")
	os.WriteFile(suppFile, []byte("leak:onleak.c\n"), 0o644)
	suppOther := filepath.Join(dir, "supp-other.txt")
	os.WriteFile(suppOther, []byte("leak:some_other_function\n"), 0o644)

	t.Run("leak fails with its function and line", func(t *testing.T) {
		r := runMemtrace(t, "--fail-on-leak", "--", bin)
		if r.code != exitLeak {
			t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitLeak, r.stderr)
		}
		loc := fmt.Sprintf("onleak.c:%d", line)
		if !regexp.MustCompile(`48 bytes in 1 blocks are definitely lost`).MatchString(r.stdout) ||
			!strings.Contains(r.stdout, "at leaky_function") || !strings.Contains(r.stdout, loc) {
			t.Errorf("report does not name leaky_function at %s:\n%s", loc, r.stdout)
		}
		// Built with frame pointers: the stack goes on to main.
		if !regexp.MustCompile(`by main\s+\S*onleak.c:\d+`).MatchString(r.stdout) {
			t.Errorf("no caller in the stack:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "48 bytes lost (definite,indirect) at exit, more than --fail-on-leak=0") {
			t.Errorf("stderr does not say why:\n%s", r.stderr)
		}
	})
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"suppressed by function", []string{"--fail-on-leak", "--suppressions", supp, "--", bin}, 0},
		{"suppressed by file", []string{"--fail-on-leak", "--suppressions", suppFile, "--", bin}, 0},
		{"other suppression", []string{"--fail-on-leak", "--suppressions", suppOther, "--", bin}, exitLeak},
		{"under the threshold", []string{"--fail-on-leak=48", "--", bin}, 0},
		{"over the threshold", []string{"--fail-on-leak=47", "--", bin}, exitLeak},
		{"threshold with units", []string{"--fail-on-leak=1k", "--", bin}, 0},
		{"kinds not counted", []string{"--fail-on-leak", "--leak-kinds=possible,reachable", "--", bin}, 0},
		{"kinds counted", []string{"--fail-on-leak", "--leak-kinds=all", "--", bin}, exitLeak},
		{"no leak", []string{"--fail-on-leak", "--", bin, "none"}, 0},
		{"no leak, command's status", []string{"--fail-on-leak", "--", bin, "none", "7"}, 7},
		{"leak wins over the command's status", []string{"--fail-on-leak", "--", bin, "leak", "7"}, exitLeak},
		{"no --fail-on-leak", []string{"--", bin}, 0},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := runMemtrace(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
		})
	}
	t.Run("suppressed blocks are counted as such", func(t *testing.T) {
		r := runMemtrace(t, "--json", "--fail-on-leak", "--suppressions", supp, "--", bin)
		procs, _ := leakRecords(t, r.stdout)
		if len(procs) != 1 || procs[0].SuppressedBytes != 48 || procs[0].DefinitelyLostBytes != 0 {
			t.Errorf("got %+v", procs)
		}
	})
	t.Run("GitHub annotations and --json-file", func(t *testing.T) {
		jf := filepath.Join(dir, "leaks.ndjson")
		cmd := exec.Command(memtrace(t), "--fail-on-leak", "--json-file", jf, "--", bin)
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		cmd.Env = append(os.Environ(), "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE="+root)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitLeak {
			t.Fatalf("exit %v, want %d; stderr:\n%s", err, exitLeak, stderr.String())
		}
		want := fmt.Sprintf("::error file=testdata/leak/onleak.c,line=%d,title=memtrace%%3A definitely lost::48 bytes in 1 blocks definitely lost, allocated in leaky_function", line)
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
		if !strings.Contains(stdout.String(), "=== memtrace FINAL report") {
			t.Errorf("stdout is not the text report:\n%s", stdout.String())
		}
		b, err := os.ReadFile(jf)
		if err != nil {
			t.Fatal(err)
		}
		procs, _ := leakRecords(t, string(b))
		if len(procs) != 1 || !procs[0].LeakChecked || procs[0].DefinitelyLostBytes != 48 {
			t.Errorf("--json-file process records: %+v", procs)
		}
	})
}

// TestFollowForks: -f checks each process the command starts at its own
// exit: a forked child (compared with valgrind, which follows forks), a
// forked child that execs, and posix_spawn.
func TestFollowForks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leak/fork.c")
	onleak := fixture(t, "leak/onleak.c")

	r := runMemtrace(t, "--fail-on-leak", "--json", "--", bin)
	if r.code != 0 {
		t.Errorf("without -f the child is not traced: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if procs, _ := leakRecords(t, r.stdout); len(procs) != 1 {
		t.Errorf("without -f: %d processes", len(procs))
	}

	t.Run("fork", func(t *testing.T) {
		vg, order := valgrindLeaks(t, bin)
		if len(order) != 2 {
			t.Fatalf("valgrind reported %d processes", len(order))
		}
		// The child exits first.
		vgChild, vgParent := vg[order[0]], vg[order[1]]
		rec := filepath.Join(t.TempDir(), "fork.rec")
		r := runMemtrace(t, "-f", "--fail-on-leak", "--json", "--top", "0", "--record", rec, "--", bin)
		if r.code != exitLeak {
			t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitLeak, r.stderr)
		}
		procs, sites := leakRecords(t, r.stdout)
		if len(procs) != 2 {
			t.Fatalf("want 2 processes, got %+v", procs)
		}
		var parent, child leakProcess
		for _, p := range procs {
			if p.DefinitelyLostBytes > 0 {
				child = p
			} else {
				parent = p
			}
		}
		if !child.LeakChecked || child.classes() != vgChild.classes() {
			t.Errorf("child: memtrace %v, valgrind %v", child.leakFigures, vgChild)
		}
		if !parent.LeakChecked || parent.classes() != vgParent.classes() {
			t.Errorf("parent: memtrace %v, valgrind %v", parent.leakFigures, vgParent)
		}
		checkSites(t, sites, child.PID, siteWant{"leak_in_child": {DefinitelyLostBytes: 64, DefinitelyLostBlocks: 1}}, nil)
		if !strings.Contains(r.stderr, fmt.Sprintf("pid %d %s: 64 bytes lost", child.PID, child.Comm)) {
			t.Errorf("stderr does not name the child:\n%s", r.stderr)
		}
		// Replayed: both checks, the child's inherited blocks included
		// (they are in no table of its own), and the same status.
		rp := runMemtrace(t, "replay", "--json", "--top", "0", rec)
		if rp.code != exitLeak {
			t.Errorf("replay: exit %d, want %d\n%s", rp.code, exitLeak, rp.stderr)
		}
		sameLeaks(t, r.stdout, rp.stdout)
	})
	for _, mode := range []string{"exec", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			r := runMemtrace(t, "-f", "--fail-on-leak", "--json", "--", bin, mode, onleak)
			if r.code != exitLeak {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitLeak, r.stderr)
			}
			procs, _ := leakRecords(t, r.stdout)
			var got []string
			for _, p := range procs {
				got = append(got, fmt.Sprintf("%s:%d/%d", p.Comm, p.DefinitelyLostBytes, p.DefinitelyLostBlocks))
			}
			if len(procs) != 2 || !regexp.MustCompile(`onleak\S*:48/1`).MatchString(strings.Join(got, " ")) {
				t.Errorf("processes %v, want the parent and onleak with 48 bytes lost", got)
			}
		})
	}
}

// TestLeakCheckAttached: with -p, the check runs when the run ends, with
// the process frozen; blocks allocated before memtrace attached are unknown,
// so the heap outside the known blocks counts as roots. The process then
// runs on and exits with its own status.
func TestLeakCheckAttached(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leak/attach.c")
	target, stdin, lines := startReady(t, bin)
	defer target.Process.Kill()

	rec := filepath.Join(t.TempDir(), "attach.rec")
	mt := exec.Command(memtrace(t), "--json", "--top", "0", "--leak-check", "-v", "--record", rec, "-p", strconv.Itoa(target.Process.Pid))
	var mtOut strings.Builder
	mt.Stdout = &mtOut
	mtErr, _ := mt.StderrPipe()
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	waitAttached(t, mtErr, &log)
	fmt.Fprintln(stdin, "go")
	expectLine(t, lines, "done")
	mt.Process.Signal(os.Interrupt)
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, log.String())
	}
	fmt.Fprintln(stdin, "exit")
	waited := make(chan error, 1)
	go func() { waited <- target.Wait() }()
	select {
	case err := <-waited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("target: %v, want exit status 3", err)
		}
	case <-time.After(testwait.Limit):
		t.Fatal("the target did not run on after the check")
	}
	procs, sites := leakRecords(t, mtOut.String())
	if len(procs) != 1 || !procs[0].LeakChecked {
		t.Fatalf("processes %+v\n%s", procs, log.String())
	}
	want := leakFigures{DefinitelyLostBytes: 24, DefinitelyLostBlocks: 1, ReachableBytes: 40 + 72, ReachableBlocks: 2}
	if procs[0].leakFigures != want {
		t.Errorf("got %v, want %v", procs[0].leakFigures, want)
	}
	checkSites(t, sites, procs[0].PID, siteWant{
		"dropped":      {DefinitelyLostBytes: 24, DefinitelyLostBlocks: 1},
		"in_old_block": {ReachableBytes: 40, ReachableBlocks: 1},
		"kept_global":  {ReachableBytes: 72, ReachableBlocks: 1},
	}, nil)
	// The check of a frozen process replays too.
	r := runMemtrace(t, "replay", "--json", "--top", "0", rec)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	sameLeaks(t, mtOut.String(), r.stdout)
	if got, want := strip(t, r.stdout), strip(t, liveFinal(mtOut.String())); got != want {
		t.Errorf("replay differs from the live final report\nreplay:\n%s\nlive:\n%s", got, want)
	}
}

// TestLeakFlagsBad: mistakes in the leak flags are usage errors.
func TestLeakFlagsBad(t *testing.T) {
	needBPF(t)
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-f", "-p", "1"}, "-f/--follow needs a command"},
		{[]string{"--fail-on-leak=lots", "--", "true"}, "not a byte count"},
		{[]string{"--leak-kinds=some", "--", "true"}, "unknown leak kind"},
		{[]string{"--suppressions", "/no/such/file", "--", "true"}, "--suppressions"},
		{[]string{"--fail-on-leak", "--leak-check=false", "--", "true"}, "--fail-on-leak needs the leak check"},
	} {
		r := runMemtrace(t, tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, exitUsage, tt.msg)
		}
	}
}

// TestLeakCheckThreadStacks: a block reached only from a worker thread's
// stack when main exits (testdata/leak/threadstack.c). At the exit stop
// the worker's stack pointer is unknown, so its whole stack is a root;
// memtrace reads only the pages of it that were ever touched, and the
// block is still reached, while the one main dropped is lost.
func TestLeakCheckThreadStacks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "leak/threadstack.c", "-pthread")
	cmd := exec.Command(memtrace(t), "--json", "--top", "0", "--leak-check", "-v", "--", bin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, errOut.String())
	}
	procs, sites := leakRecords(t, out.String())
	if len(procs) != 1 || !procs[0].LeakChecked {
		t.Fatalf("processes %+v\n%s", procs, errOut.String())
	}
	// on_stack only wraps malloc: its caller is charged.
	checkSites(t, sites, procs[0].PID, siteWant{
		"worker":  {ReachableBytes: 4096, ReachableBlocks: 1},
		"dropped": {DefinitelyLostBytes: 100, DefinitelyLostBlocks: 1},
	}, nil)
	// The worker's stack: 8 MiB, a few pages of it touched.
	m := regexp.MustCompile(`msg="leak check" .* untouched=(\d+)`).FindStringSubmatch(errOut.String())
	if m == nil {
		t.Fatalf("no leak check line with untouched bytes:\n%s", errOut.String())
	}
	if n, _ := strconv.ParseUint(m[1], 10, 64); n < 7<<20 {
		t.Errorf("untouched %d bytes, want most of the worker's 8 MiB stack left unread", n)
	}
}
