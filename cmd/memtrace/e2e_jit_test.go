package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// The JIT tests: node's JS functions, named by node's perf map, are
// charged what they allocate through Buffer.alloc (docs/runtimes-jit.md),
// and a fake JIT's perf map is read as it grows, and not read when it is
// a symlink or another user's.

// needNode skips (fails under CI=true) without node.
func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v: install nodejs", err)
		}
		t.Skip(err)
	}
}

// jitCovers reads a process's perf map, or its jitdump in dir when dir is
// not "", and reports whether it names the return address ret (the call
// before it).
func jitCovers(t *testing.T, pid int, dir string, ret uint64) bool {
	t.Helper()
	var syms []symbolize.JITSymbol
	if dir == "" {
		b, err := os.ReadFile(fmt.Sprintf("/tmp/perf-%d.map", pid))
		if err != nil {
			return false
		}
		syms, _, _, _ = symbolize.ParsePerfMap(b)
	} else {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("jit-%d.dump", pid)))
		if err != nil {
			return false
		}
		defer f.Close()
		st, _ := f.Stat()
		var d symbolize.JITDump
		syms, _ = d.Next(f, st.Size())
	}
	for _, s := range syms {
		if ret-1 >= s.Start && ret-1 < s.Start+s.Size {
			return true
		}
	}
	return false
}

// checkNodeReport checks a node run of testdata/jit/buffers.js: at least
// 80% of the 64 MiB of Buffers packFrames keeps are charged to packFrames
// by name (every tier's code: JS:*packFrames, JS:^packFrames), and no
// heap or mmap site is left unnamed where the perf map (or the jitdump in
// dumpDir, when not "") covers it.
func checkNodeReport(t *testing.T, out string, pid int, dumpDir string) {
	t.Helper()
	script := filepath.Join(repoRoot(t), "testdata", "jit", "buffers.js")
	rep := parseNDJSON(t, out)
	const kept = 64 << 20
	var named uint64
	for _, s := range rep.sites {
		if s.PID != pid || !s.Final {
			continue
		}
		if s.Category == "heap" && strings.HasPrefix(s.Function, "JS:") && strings.Contains(s.Function, "packFrames "+script) {
			named += s.LiveBytes
		}
		if s.Function == "" {
			ret, err := strconv.ParseUint(strings.TrimPrefix(s.Address, "0x"), 16, 64)
			if err == nil && jitCovers(t, pid, dumpDir, ret) {
				t.Errorf("%s site at %s (%d live bytes) is unnamed, but the perf map covers it", s.Category, s.Address, s.LiveBytes)
			}
		}
	}
	t.Logf("packFrames charged %d of the %d bytes it keeps (%.1f%%)", named, kept, 100*float64(named)/kept)
	if named*10 < kept*8 {
		var top []string
		for _, s := range rep.sites {
			if s.Final && s.Category == "heap" && s.LiveBytes > 1<<20 {
				top = append(top, fmt.Sprintf("%s %d", s.Function, s.LiveBytes))
			}
		}
		t.Errorf("packFrames charged %d live bytes, want >= 80%% of %d; sites over 1 MiB: %q", named, kept, top)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestNodeBuffersByJSFunction(t *testing.T) {
	needBPF(t)
	needNode(t)
	script := filepath.Join(repoRoot(t), "testdata", "jit", "buffers.js")
	// command runs node with flag under memtrace --, in dir (node writes
	// its jitdump and an isolate-*-v8.log in its working directory).
	command := func(t *testing.T, flag, dir string) {
		cmd := exec.Command(memtrace(t), "--json", "--top", "0", "--", "node", flag, script)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader("go\n")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("memtrace: %v\n%s", err, stderr.String())
		}
		var records []string
		pid := 0
		for _, l := range strings.Split(stdout.String(), "\n") {
			if strings.HasPrefix(l, "{") {
				records = append(records, l)
				var p processRecord
				if json.Unmarshal([]byte(l), &p) == nil && p.Type == "process" && p.Comm == "node" {
					pid = p.PID
				}
			}
		}
		t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid)) })
		dumpDir := ""
		if flag == "--perf-prof" {
			dumpDir = dir
		}
		checkNodeReport(t, strings.Join(records, "\n"), pid, dumpDir)
	}
	t.Run("command", func(t *testing.T) { command(t, "--perf-basic-prof", t.TempDir()) })
	t.Run("jitdump", func(t *testing.T) { command(t, "--perf-prof", t.TempDir()) })
	t.Run("attach", func(t *testing.T) {
		node := exec.Command("node", "--perf-basic-prof", script)
		node.Dir = t.TempDir() // node writes an isolate-*-v8.log there
		stdin, _ := node.StdinPipe()
		stdout, _ := node.StdoutPipe()
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			node.Process.Kill()
			node.Wait()
			os.Remove(fmt.Sprintf("/tmp/perf-%d.map", node.Process.Pid))
		})
		lines := bufio.NewReader(stdout)
		expectLine(t, lines, "ready")
		mt, out, log := startAttached(t, node.Process.Pid, "--json", "--top", "0")
		fmt.Fprintln(stdin, "go")
		expectLine(t, lines, "kept 64")
		stdin.Close()
		if err := mt.Wait(); err != nil {
			t.Fatalf("memtrace: %v\n%s", err, log)
		}
		checkNodeReport(t, out.String(), node.Process.Pid, "")
	})
}

// fakeJIT starts testdata/jit/fakejit.c (mode: "", "symlink", "chown")
// and returns it, its stdin and stdout, and its code's address.
func fakeJIT(t *testing.T, mode string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, uint64) {
	t.Helper()
	bin := fixture(t, "jit/fakejit.c")
	cmd := exec.Command(bin, mode)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
		os.Remove(fmt.Sprintf("/tmp/fakejit-real-%d.map", pid))
	})
	lines := bufio.NewReader(stdout)
	l, err := lines.ReadString('\n')
	base, perr := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(l), "ready "), 16, 64)
	if err != nil || perr != nil {
		t.Fatalf("fakejit said %q (%v)", l, err)
	}
	return cmd, stdin, lines, base
}

// siteStream reads memtrace's NDJSON as it comes and waits for call
// sites.
type siteStream struct {
	lines *bufio.Reader
	seen  map[string]siteRecord // by address, the newest record
}

// waitFor reads records until every address in want has a heap site
// named as want says, or fails after a minute (a report comes every
// 100 ms).
func (s *siteStream) waitFor(t *testing.T, want map[uint64]string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		done := true
		for a, fn := range want {
			if r, ok := s.seen[fmt.Sprintf("0x%x", a)]; !ok || r.Function != fn {
				done = false
			}
		}
		if done {
			return
		}
		if !s.next() {
			break
		}
	}
	got := map[string]string{}
	for a, r := range s.seen {
		got[a] = r.Function
	}
	t.Fatalf("want sites %v, saw %v", want, got)
}

// next reads one record; false at the stream's end.
func (s *siteStream) next() bool {
	l, err := s.lines.ReadString('\n')
	var r siteRecord
	if json.Unmarshal([]byte(l), &r) == nil && r.Type == "callsite" && r.Category == "heap" {
		s.seen[r.Address] = r
	}
	return err == nil
}

// drain reads the records up to the stream's end (memtrace's exit).
func (s *siteStream) drain() {
	for s.next() {
	}
}

// TestJITPerfMapGrows: a fake JIT's functions are named exactly, at their
// exact return addresses, from a perf map read as it grows: a line is
// named once complete, and the newest line for an address wins.
func TestJITPerfMapGrows(t *testing.T) {
	needBPF(t)
	cmd, stdin, lines, base := fakeJIT(t, "")
	rec := filepath.Join(t.TempDir(), "jit.mtrace")
	mt := exec.Command(memtrace(t), "-v", "--json", "--top", "0", "-i", "100ms", "--record", rec, "-p", strconv.Itoa(cmd.Process.Pid))
	mtOut, _ := mt.StdoutPipe()
	mtErr, _ := mt.StderrPipe()
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.Process.Kill() })
	var log strings.Builder
	waitAttached(t, mtErr, &log)
	s := &siteStream{lines: bufio.NewReader(mtOut), seen: map[string]siteRecord{}}
	a, b, c := base+16, base+32+16, base+64+16

	fmt.Fprintln(stdin, "1")
	expectLine(t, lines, "1 done")
	// B's line has no newline yet: B is not named (nor guessed).
	s.waitFor(t, map[uint64]string{a: "fake::alloc one(int)", b: ""})

	fmt.Fprintln(stdin, "2")
	expectLine(t, lines, "2 done")
	s.waitFor(t, map[uint64]string{a: "fake::alloc one(int)", b: "fake::alloc two(int)", c: "C new"})

	fmt.Fprintln(stdin, "exit")
	s.drain()
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, log.String())
	}
	for addr, want := range map[uint64]struct {
		fn   string
		live uint64
	}{a: {"fake::alloc one(int)", 10000}, b: {"fake::alloc two(int)", 20000}, c: {"C new", 30000}} {
		r := s.seen[fmt.Sprintf("0x%x", addr)]
		if !r.Final || r.Function != want.fn || r.LiveBytes != want.live ||
			r.Module != fmt.Sprintf("/tmp/perf-%d.map", cmd.Process.Pid) {
			t.Errorf("site 0x%x: %+v, want final %q with %d live bytes", addr, r, want.fn, want.live)
		}
	}

	// The recording names the JIT code as the live run did, with the
	// process and its perf map gone.
	os.Remove(fmt.Sprintf("/tmp/perf-%d.map", cmd.Process.Pid))
	replayed := parseNDJSON(t, runMemtrace(t, "replay", "--json", "--top", "0", rec).stdout)
	for _, addr := range []uint64{a, b, c} {
		key := fmt.Sprintf("0x%x", addr)
		var got siteRecord
		for _, r := range replayed.sites {
			if r.Final && r.Address == key {
				got = r
			}
		}
		live := s.seen[key]
		if got.Function != live.Function || got.Module != live.Module || got.LiveBytes != live.LiveBytes {
			t.Errorf("replayed site %s: %q in %q, %d live bytes; the live run had %q in %q, %d", key,
				got.Function, got.Module, got.LiveBytes, live.Function, live.Module, live.LiveBytes)
		}
	}
}

// TestJITPerfMapUntrusted: a perf map that is a symlink, or owned by a
// user the process does not run as, is not read, as perf does not.
func TestJITPerfMapUntrusted(t *testing.T) {
	needBPF(t)
	for _, mode := range []string{"symlink", "chown"} {
		t.Run(mode, func(t *testing.T) {
			cmd, stdin, lines, base := fakeJIT(t, mode)
			mt, out, log := startAttached(t, cmd.Process.Pid, "--json", "--top", "0")
			fmt.Fprintln(stdin, "1")
			expectLine(t, lines, "1 done")
			fmt.Fprintln(stdin, "exit")
			if err := mt.Wait(); err != nil {
				t.Fatalf("memtrace: %v\n%s", err, log)
			}
			rep := parseNDJSON(t, out.String())
			found := false
			for _, r := range rep.sites {
				if r.Final && r.Address == fmt.Sprintf("0x%x", base+16) {
					found = true
					if r.Function != "" {
						t.Errorf("site named %q from an untrusted map", r.Function)
					}
				}
			}
			if !found {
				t.Errorf("no site at 0x%x", base+16)
			}
			if !strings.Contains(log.String(), "untrusted file") {
				t.Errorf("memtrace did not say why it did not read the map:\n%s", log)
			}
		})
	}
}

// TestJVMDirectBuffersByMethod: with --jvm-perfmap, a Java method that
// keeps direct ByteBuffers, compiled (testdata/jit/DirectKeeper.java warms
// it up; frame pointers kept), is charged their bytes within 20%.
func TestJVMDirectBuffersByMethod(t *testing.T) {
	needBPF(t)
	javaClasses(t) // java, javac, jcmd are there (skips, or fails under CI, if not)
	dir := t.TempDir()
	if out, err := exec.Command("javac", "-d", dir, filepath.Join(repoRoot(t), "testdata", "jit", "DirectKeeper.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	java := exec.Command("java", "-XX:+PreserveFramePointer", "-cp", dir, "DirectKeeper")
	stdin, _ := java.StdinPipe()
	stdout, _ := java.StdoutPipe()
	if err := java.Start(); err != nil {
		t.Fatal(err)
	}
	pid := java.Process.Pid
	t.Cleanup(func() {
		java.Process.Kill()
		java.Wait()
		os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
	})
	lines := bufio.NewReader(stdout)
	expectLine(t, lines, fmt.Sprintf("ready %d", pid))
	mt, out, log := startAttached(t, pid, "--json", "--top", "0", "--jvm-perfmap")
	fmt.Fprintln(stdin, "go")
	expectLine(t, lines, "kept 64")
	stdin.Close()
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, log)
	}
	rep := parseNDJSON(t, out.String())
	const kept = 64 << 20
	var charged uint64
	for _, s := range rep.sites {
		if s.PID == pid && s.Final && s.Category == "heap" && strings.Contains(s.Function, " DirectKeeper.keep(") {
			charged += s.LiveBytes
		}
	}
	t.Logf("DirectKeeper.keep charged %d of the %d bytes it keeps (%.1f%%)", charged, kept, 100*float64(charged)/kept)
	if charged*10 < kept*8 || charged*10 > kept*12 {
		t.Errorf("DirectKeeper.keep charged %d live bytes, want %d within 20%%\n%s", charged, kept, log)
	}
	if charged != kept {
		// Where the rest went: the sites holding a buffer or more.
		for _, s := range rep.sites {
			if s.PID == pid && s.Final && s.LiveBytes >= 1<<20 {
				t.Logf("site %s %s: %d live bytes, stack %+v", s.Category, s.Function, s.LiveBytes, s.Stack)
			}
		}
	}
	// The pages they made resident (sampled write faults, zeroed by
	// Unsafe_SetMemory0) are charged to keep too: at least half of them,
	// the estimate's error being a few percent.
	var resident uint64
	var others []string
	for l := range strings.Lines(out.String()) {
		var r struct {
			Type          string `json:"type"`
			Final         bool   `json:"final"`
			Function      string `json:"function"`
			ResidentBytes uint64 `json:"resident_bytes"`
		}
		if json.Unmarshal([]byte(l), &r) == nil && r.Type == "resident" && r.Final && strings.Contains(r.Function, " DirectKeeper.keep(") {
			resident += r.ResidentBytes
		} else if r.Type == "resident" && r.Final && r.ResidentBytes >= 1<<20 {
			others = append(others, fmt.Sprintf("%s: ~%d", r.Function, r.ResidentBytes))
		}
	}
	t.Logf("DirectKeeper.keep made ~%d bytes resident", resident)
	if resident*2 < kept {
		t.Errorf("DirectKeeper.keep charged ~%d resident bytes, want at least half of %d; others charged a MiB or more: %q", resident, kept, others)
	}
	if !strings.Contains(log.String(), "JVM perf map written") {
		t.Errorf("no perf map was asked for:\n%s", log)
	}
}

// TestJavaHeapResidentByName: the pages of the Java heap are made
// resident by G1 and HotSpot's allocation paths; the resident table names
// them "Java heap" (managed_heap), not as call sites of the program's.
// HeapKeeper keeps ~130 MiB of arrays: at least 100 MiB of resident
// estimate must be the Java heap's.
func TestJavaHeapResidentByName(t *testing.T) {
	needBPF(t)
	javaClasses(t)
	dir := t.TempDir()
	if out, err := exec.Command("javac", "-d", dir, filepath.Join(repoRoot(t), "testdata", "jit", "HeapKeeper.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	r := runMemtrace(t, "--json", "--top", "0", "--", "java", "-XX:+UseG1GC", "-cp", dir, "HeapKeeper")
	if r.code != 0 {
		t.Fatalf("memtrace exit %d\n%s", r.code, r.stderr)
	}
	var heap uint64
	for l := range strings.Lines(r.stdout) {
		var rec struct {
			Type          string `json:"type"`
			Final         bool   `json:"final"`
			ManagedHeap   string `json:"managed_heap"`
			ResidentBytes uint64 `json:"resident_bytes"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Type == "resident" && rec.Final && rec.ManagedHeap == "Java heap" {
			heap += rec.ResidentBytes
		}
	}
	t.Logf("resident charged to the Java heap: ~%d bytes", heap)
	if heap < 100<<20 {
		t.Errorf("~%d resident bytes named Java heap, want at least 100 MiB", heap)
	}
}
