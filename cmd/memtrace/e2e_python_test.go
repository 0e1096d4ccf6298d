package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/pprof/profile"
)

// The Python tests run testdata/python's scripts on every CPython found:
// Debian's /usr/bin/python3.11 (which CI installs: required there) and
// pyenv's 3.10 to 3.13 when present. Each script is run twice, under
// memtrace and under tracemalloc (PYTHONTRACEMALLOC), and the two views
// of the same moment are compared.

// interpreter is one CPython to test on.
type interpreter struct {
	name, path string
	// inlined: the build (Debian's, with LTO and PGO) inlines pymalloc's
	// fast path into its callers, where no probe sees it: its blocks are
	// the 16 KiB pools it opens (allocate_from_new_pool), each charged to
	// the line that opened it.
	inlined bool
}

// pythons lists the interpreters to test on; under CI=true Debian's
// python3.11 must be one. MEMTRACE_PYTHONS, a comma-separated list of
// their names (debian-3.11, pyenv-3.12.1), keeps only those (the kernel
// matrix runs Debian's alone).
func pythons(t *testing.T) []interpreter {
	t.Helper()
	all := allPythons(t)
	only := os.Getenv("MEMTRACE_PYTHONS")
	if only == "" {
		return all
	}
	var out []interpreter
	for _, py := range all {
		if slices.Contains(strings.Split(only, ","), py.name) {
			out = append(out, py)
		}
	}
	if len(out) == 0 {
		t.Fatalf("MEMTRACE_PYTHONS=%s names none of the interpreters found", only)
	}
	return out
}

func allPythons(t *testing.T) []interpreter {
	t.Helper()
	var out []interpreter
	if _, err := os.Stat("/usr/bin/python3.11"); err == nil {
		out = append(out, interpreter{"debian-3.11", "/usr/bin/python3.11", true})
	} else if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %v: install python3.11", err)
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".pyenv")
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "versions", "3.1[0-3].*"))
	sort.Strings(dirs)
	for _, d := range dirs {
		v := filepath.Base(d)
		minor := v[:strings.LastIndexByte(v, '.')]
		bin := filepath.Join(d, "bin", "python"+minor)
		if _, err := os.Stat(bin); err == nil {
			out = append(out, interpreter{"pyenv-" + v, bin, false})
		}
	}
	if len(out) == 0 {
		t.Skip("no CPython 3.10 to 3.13 found")
	}
	return out
}

// tracemallocView runs script under tracemalloc and returns its top lines
// ("file:line" to bytes) and its total traced bytes.
func tracemallocView(t *testing.T, py interpreter, script string, env ...string) (map[string]uint64, uint64) {
	t.Helper()
	cmd := exec.Command(py.path, script)
	cmd.Env = append(append(os.Environ(), "PYTHONTRACEMALLOC=1"), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s under tracemalloc: %v", py.path, script, err)
	}
	lines := map[string]uint64{}
	var total uint64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if f[0] == "total" {
			total = n
		} else {
			lines[f[0]] = n
		}
	}
	if total == 0 {
		t.Fatalf("%s %s under tracemalloc printed no total:\n%s", py.path, script, out)
	}
	return lines, total
}

// runWhole runs memtrace with --json-file and args until a run loses no
// event, three runs at most, and returns that run and its NDJSON report. The
// comparisons with tracemalloc hold for whole runs only; a Python
// program allocates faster than a reader starved by a loaded machine can
// keep up with, and memtrace then counts what it lost (the CI run that
// lost 112 628 of 1.9 million events, with --detail, fell to 0.75x).
// The ring is four times a Python target's default, for such a reader
// to catch up after a stall.
func runWhole(t *testing.T, args ...string) (result, ndjson) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		jsonFile := filepath.Join(t.TempDir(), "out.ndjson")
		r := runMemtrace(t, append([]string{"--json-file", jsonFile, "--ring-size", "256MiB"}, args...)...)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		js, err := os.ReadFile(jsonFile)
		if err != nil {
			t.Fatal(err)
		}
		rep := parseNDJSON(t, string(js))
		lost := rep.finalProcess(t).LostEvents
		if lost == 0 {
			return r, rep
		}
		if attempt == 3 {
			t.Fatalf("%d events lost in each of %d runs (the ring overflowed: a loaded machine)", lost, attempt)
		}
		t.Logf("%d events lost (the ring overflowed: a loaded machine); running again", lost)
	}
}

// TestPythonPymalloc: pymalloc is probed as an allocator. Python's small
// objects are blocks, so the live heap is what tracemalloc traces (which
// sees the same PyMem/PyObject calls, and malloc's through PyMem_Raw);
// its arenas are the heap's footprint, not anonymous mmap call sites; the
// leak check leaves its blocks to the garbage collector.
func TestPythonPymalloc(t *testing.T) {
	needBPF(t)
	script := filepath.Join("..", "..", "testdata", "python", "keep.py")
	for _, py := range pythons(t) {
		t.Run(py.name, func(t *testing.T) {
			_, want := tracemallocView(t, py, script)
			r, rep := runWhole(t, "--", py.path, script)
			p := rep.finalProcess(t)
			ratio := float64(p.LiveBytes) / float64(want)
			t.Logf("live %d bytes, tracemalloc %d: %.3fx; anon mmap live %d", p.LiveBytes, want, ratio, p.Mmap.LiveBytes)
			if ratio < 0.8 || ratio > 1.25 {
				t.Errorf("live heap %d bytes is %.3fx tracemalloc's %d, want 0.8x to 1.25x", p.LiveBytes, ratio, want)
			}
			if p.Mmap.LiveBytes > 1<<20 {
				t.Errorf("anon mmap live %d bytes: pymalloc's arenas are the heap's, not mmap call sites", p.Mmap.LiveBytes)
			}
			// keep.py's 8 MB of bytearray buffers are malloc's, each
			// pointed to by an object in a pool: reached, not possibly
			// lost (a pointer to an object inside a pool is one to its
			// start: leakcheck.Input.Whole).
			if m := regexp.MustCompile(`possibly lost: (\d+) bytes`).FindStringSubmatch(r.stdout); m == nil {
				t.Errorf("no possibly lost figure in the leak check:\n%s", r.stdout)
			} else if n, _ := strconv.ParseUint(m[1], 10, 64); n > 1<<20 {
				t.Errorf("possibly lost: %d bytes, want under 1 MiB (what Python objects point to is reached)", n)
			}
			if !strings.Contains(r.stdout, "not judged (Python's garbage collector owns them)") {
				t.Errorf("the leak check does not say it leaves pymalloc's blocks alone:\n%s", r.stdout)
			}
		})
	}
}

// TestPythonLines: on every interpreter, for keep.py and shapes.py, each
// line tracemalloc ranks among a script's top lines (1 MiB or more) has its live bytes charged
// to the same file:line by memtrace, within 0.8x to 1.25x; with --detail,
// at least 99% of the stacks charged to the script's lines reach its
// <module> frame. Debian's python3.11 inlines pymalloc's fast path (its
// blocks are unseen there), so its lines are charged the 16 KiB pools they
// opened: two lines that make objects of one size class in turn share
// its pools unevenly (keep.py's line 16 makes ints, and line 17 floats,
// of 32 bytes: 510 to a pool, so line 16 opens every pool and is charged
// 1.8x), so only its lines of 4 MiB or more are held to the bounds.
func TestPythonLines(t *testing.T) {
	needBPF(t)
	for _, py := range pythons(t) {
		for _, name := range []string{"keep.py", "shapes.py"} {
			t.Run(py.name+"/"+name, func(t *testing.T) {
				pythonLines(t, py, name)
			})
		}
	}
}

// pythonLines is TestPythonLines for one interpreter and script.
func pythonLines(t *testing.T, py interpreter, name string) {
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "python", name))
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := tracemallocView(t, py, script)
	// The 500 sites with the most live bytes hold all of a script's
	// lines; every site (--top 0) is 26 000 of the imports' stacks on
	// pyenv's 3.11, 350 MB of NDJSON, twice the run's time.
	_, rep := runWhole(t, "--detail", "--top", "500", "--", py.path, script)
	got := map[string]uint64{}
	var pyStacks, reached int
	var pyBytes, reachedBytes uint64
	for _, s := range rep.sites {
		if !s.Final || s.Module != "python" {
			continue
		}
		if s.Category == "heap" {
			got[s.File+":"+strconv.Itoa(s.Line)] += s.LiveBytes
		}
		if s.Category != "heap" || s.File != script {
			continue
		}
		pyStacks++
		pyBytes += s.LiveBytes
		ok := false
		for _, f := range s.Stack {
			ok = ok || (f.Function == "<module>" && f.File == script)
		}
		if ok {
			reached++
			reachedBytes += s.LiveBytes
		} else if pyStacks-reached <= 2 {
			t.Logf("%s:%d: a stack short of <module>: %+v", s.Function, s.Line, s.Stack)
		}
	}
	checkLines(t, py, script, lines, got)
	t.Logf("%d of %d stacks charged to the script reach its <module>, %d of their %d live bytes",
		reached, pyStacks, reachedBytes, pyBytes)
	if pyStacks == 0 || reached*100 < pyStacks*99 {
		t.Errorf("%d of %d stacks charged to the script reach its <module>, want 99%%", reached, pyStacks)
	}
}

// checkLines holds memtrace's live bytes per script line, got, to
// tracemalloc's, lines: within 0.8x to 1.25x for each line of 1 MiB or
// more (4 MiB on a build that inlines pymalloc: TestPythonLines), and at
// least 3 lines checked.
func checkLines(t *testing.T, py interpreter, script string, lines, got map[string]uint64) {
	t.Helper()
	min := uint64(1 << 20)
	if py.inlined {
		min = 4 << 20
	}
	checked := 0
	for line, want := range lines {
		if !strings.HasPrefix(line, script+":") || want < min {
			continue
		}
		checked++
		ratio := float64(got[line]) / float64(want)
		t.Logf("%s: memtrace %d, tracemalloc %d: %.3fx", line, got[line], want, ratio)
		if ratio < 0.8 || ratio > 1.25 {
			t.Errorf("%s: %d live bytes, %.3fx tracemalloc's %d: want 0.8x to 1.25x", line, got[line], ratio, want)
		}
	}
	if checked < 3 {
		t.Errorf("%d of tracemalloc's lines checked, want at least 3: %v", checked, lines)
	}
}

// TestPythonCodeReused: testdata/python/reuse.py frees code objects and
// makes new ones at the same address, forty times; the even rounds' run
// and allocate a bytearray of their own size. The probes read a code
// object's tag (its names' addresses, folded) once and keep it until
// code_dealloc frees the object, which tells memtrace so (bpf/python.h):
// each f<i>'s bytes must be charged to f<i>, or to PythonFreed when
// memtrace read the object after its free, never to another f<j>.
// Without code_dealloc's probe, the tag kept for the address's first code
// object went to all of them: f0 was charged 7.6 MiB, or all were
// PythonFreed. Without its event, a round whose code object and names
// took the addresses of the last round run's was charged to that round,
// once memtrace had read it alive; and without co_name's characters in
// the tag, a round read late was charged to the one that had taken its
// place (a slow guest of the kernel matrix; "late" makes it the rule).
func TestPythonCodeReused(t *testing.T) {
	needBPF(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "python", "reuse.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, py := range pythons(t) {
		for _, alive := range []string{"0.05", "0"} {
			t.Run(py.name+"/alive-"+alive, func(t *testing.T) { codeReused(t, py, script, alive) })
		}
	}
}

// codeReused runs reuse.py, each code object that runs alive for alive
// seconds (0: most are read after their free).
func codeReused(t *testing.T, py interpreter, script, alive string) {
	const rounds = 40
	r, rep := runWhole(t, "-v", "--top", "0", "--", py.path, script, alive)
	if !strings.Contains(r.stderr, "function=code_dealloc") {
		t.Fatalf("no probe on code_dealloc placed:\n%s", r.stderr)
	}
	m := regexp.MustCompile(fmt.Sprintf(`(?m)^%d (\d+) (\d+)$`, rounds)).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("reuse.py printed no count of addresses:\n%s", r.stdout)
	}
	// Else the case is not made: no address was reused. 3.10
	// hands each copy a new block (its names are still checked).
	switch addrs, _ := strconv.Atoi(m[1]); {
	case addrs <= rounds/2:
	case strings.Contains(py.name, "-3.10."):
		t.Logf("3.10: %d rounds' code objects had %d addresses", rounds, addrs)
	default:
		t.Fatalf("%d rounds' code objects had %d addresses, want reuse", rounds, addrs)
	}
	t.Logf("%s of %d rounds run had the last run's code and names addresses", m[2], rounds/2)
	got := map[string]uint64{}
	for _, s := range rep.sites {
		if s.Final && s.Module == "python" && strings.HasPrefix(s.File, "gen") {
			got[s.File+" "+s.Function] += s.LiveBytes
		}
	}
	named := 0
	for i := 0; i < rounds; i += 2 {
		// bytearray(n) holds n+1 bytes; pymalloc's object header
		// (56 bytes) is a block too where its call is probed.
		want := uint64(100000+i*4096) + 1
		key := fmt.Sprintf("gen%d.py f%d", i, i)
		if n, ok := got[key]; ok {
			named++
			if n < want || n > want+64 {
				t.Errorf("%s: %d live bytes, want %d (+ its object's header)", key, n, want)
			}
		}
		delete(got, key)
	}
	if len(got) > 0 {
		t.Errorf("sites named after none of their own code: %v", got)
	}
	t.Logf("%d of %d code objects run named", named, rounds/2)
	// Each lived 50 ms, and the reader drains every 20 ms.
	if named == 0 && alive != "0" {
		t.Errorf("no f<i> named: the kept tags were never met")
	}
}

// TestPythonEmbedded: a C program that embeds pyenv's libpython3.x.so
// (testdata/python/embed.c) runs keep.py. memtrace finds the interpreter
// in the library, and each of tracemalloc's top lines of the script (the
// same interpreter, run as python) gets its live bytes within 0.8x to
// 1.25x, as TestPythonLines asks of the interpreters themselves.
func TestPythonEmbedded(t *testing.T) {
	needBPF(t)
	// pyenv's 3.12 when there is one, else Debian's libpython3.11.so
	// (python3.11-dev, which .ci/run installs).
	var py *interpreter
	for _, p := range pythons(t) {
		if strings.HasPrefix(p.name, "pyenv-3.12") || (py == nil && strings.HasPrefix(p.name, "pyenv-")) {
			py = &p
		}
	}
	if py == nil {
		py = &pythons(t)[0]
	}
	if _, err := os.Stat(py.path + "-config"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v: install python3.11-dev", err)
		}
		t.Skip(err)
	}
	config := py.path + "-config"
	flags, err := exec.Command(config, "--cflags", "--ldflags", "--embed").Output()
	if err != nil {
		t.Fatalf("%s: %v", config, err)
	}
	libdir, err := exec.Command(config, "--prefix").Output()
	if err != nil {
		t.Fatalf("%s --prefix: %v", config, err)
	}
	bin := fixture(t, "python/embed.c", append(strings.Fields(string(flags)),
		"-Wl,-rpath,"+filepath.Join(strings.TrimSpace(string(libdir)), "lib"))...)
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "python", "keep.py"))
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := tracemallocView(t, *py, script)
	_, rep := runWhole(t, "--top", "0", "--", bin, script)
	got := map[string]uint64{}
	for _, s := range rep.sites {
		// Debian's build: blocks and the arenas they opened (TestPythonLines).
		if s.Final && s.Module == "python" && (s.Category == "heap" || py.inlined) {
			got[s.File+":"+strconv.Itoa(s.Line)] += s.LiveBytes
		}
	}
	checkLines(t, *py, script, lines, got)
}

// TestPythonHost: the whole host finds a Python process by itself, one
// started after memtrace. With --heap its heap call sites are the
// script's lines, and its resident memory (the whole host's default
// attribution, sampled faults) is charged to the script's lines too.
func TestPythonHost(t *testing.T) {
	needBPF(t)
	// The last found: pyenv's newest when there is one, Debian's in the
	// kernel matrix (its blocks are pools: a 512 KiB sample finds each
	// line either way).
	all := pythons(t)
	py := all[len(all)-1]
	run := runPythonOnHost(t, py, "--heap")
	heap := map[string]uint64{}
	resident := map[string]uint64{}
	for _, r := range run.records {
		if r.File != run.script {
			continue
		}
		// By line: 3.11 runs comprehensions as code of their own (squares.<locals>.<listcomp>).
		key := strconv.Itoa(r.Line)
		switch {
		case r.Type == "callsite" && r.Category == "heap":
			heap[key] += r.LiveBytes
		case r.Type == "resident":
			resident[key] += r.ResidentBytes
		}
	}
	t.Logf("heap by line: %v", heap)
	t.Logf("resident by line: %v", resident)
	// keep.py's lines keep 2 to 16 MiB each: sampled, most lines have
	// heap, and the big ones of Python objects resident memory (the
	// pages their objects made resident).
	lines := 0
	for _, n := range heap {
		if n > 0 {
			lines++
		}
	}
	if lines < 3 {
		t.Errorf("%d of keep.py's lines have live heap, want at least 3: %v", lines, heap)
	}
	checkResidentLines(t, resident)
}

// TestPythonHostResident: the whole host's default (resident memory
// alone, no allocator probed) on Debian's stripped python3.11 charges the
// script's pages to its lines, not to the interpreter's unnamed helpers.
// The probes used to report a faulting instruction known to charge itself
// without a walk, so without the Python frames: pymalloc's unnamed pool
// code in python3.11 was charged 16 MiB of keep.py's pages.
func TestPythonHostResident(t *testing.T) {
	needBPF(t)
	var py *interpreter
	for _, p := range pythons(t) {
		if p.name == "debian-3.11" {
			py = &p
		}
	}
	if py == nil {
		t.Skip("no Debian python3.11 (MEMTRACE_PYTHONS leaves it out)")
	}
	run := runPythonOnHost(t, *py)
	resident := map[string]uint64{}
	var unnamed uint64
	for _, r := range run.records {
		if r.Type != "resident" {
			continue
		}
		switch {
		case r.File == run.script:
			resident[strconv.Itoa(r.Line)] += r.ResidentBytes
		case r.Function == "" && r.Module == py.path:
			unnamed += r.ResidentBytes
		}
	}
	t.Logf("resident by line: %v; the interpreter's unnamed functions: %d bytes", resident, unnamed)
	checkResidentLines(t, resident)
	if unnamed > 2<<20 {
		t.Errorf("%d bytes resident charged to python3.11's unnamed functions, want under 2 MiB: they belong to the script's lines", unnamed)
	}
}

// checkResidentLines checks that keep.py's big lines were charged the
// pages their objects made resident.
func checkResidentLines(t *testing.T, resident map[string]uint64) {
	t.Helper()
	for _, line := range []string{"17", "26", "34"} {
		if resident[line] < 1<<20 {
			t.Errorf("%d bytes resident charged to keep.py:%s, want 1 MiB or more", resident[line], line)
		}
	}
}

// hostPythonRecord is what the Python host tests read of a record.
type hostPythonRecord struct {
	Type, Category, Function, File, Module string
	PID                                    int
	Line                                   int
	LiveBytes                              uint64 `json:"live_bytes"`
	ResidentBytes                          uint64 `json:"resident_bytes"`
	Python                                 bool
}

// hostPythonRun is one Python process's records, and the script it ran.
type hostPythonRun struct {
	records []hostPythonRecord
	script  string
}

// holdExit is the Python that runs keep.py for the host tests. keep.py
// ends with os._exit, and a process gone by the time memtrace reads its
// last events leaves those events' new code objects unnamed (docs/python.md):
// so its os._exit first forks a child that exits at once, prints the
// child's pid, and waits for a line on stdin. The child's exit comes after
// every event of its parent's in the ring, so once memtrace has handled it,
// it has read them all.
const holdExit = `import os, sys, runpy
sys.stdin.readline()
real_exit = os._exit
def hold(code):
    sys.stdout.flush()
    child = os.fork()
    if child == 0:
        real_exit(0)
    os.waitpid(child, 0)
    sys.stdout.write("held %d\n" % child)
    sys.stdout.flush()
    sys.stdin.readline()
    real_exit(code)
os._exit = hold
runpy.run_path(sys.argv[1], run_name="__main__")
`

// runPythonOnHost runs keep.py under py while a whole-host memtrace
// (args added) watches, and returns the records of py's process. The
// script starts once the process's unwind tables are loaded (a walk
// before them stops at the allocator): run_path keeps the script's own
// file name in its code objects. It exits once memtrace has read its
// events (holdExit).
func runPythonOnHost(t *testing.T, py interpreter, args ...string) hostPythonRun {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "python", "keep.py"))
	if err != nil {
		t.Fatal(err)
	}
	h := startHostWith(t, append(args, "--comm", filepath.Base(py.path))...)
	cmd := exec.Command(py.path, "-c", holdExit, script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	ready := `msg="unwind tables loaded" pid=` + strconv.Itoa(pid) + " "
	if !slices.Contains(args, "--heap") {
		// Resident memory alone: each file's table is logged as it
		// loads, and the interpreter's is the one its walks need.
		ready = `msg="unwind table loaded" file=/proc/` + strconv.Itoa(pid) + "/root" + py.path
	}
	h.waitFor(t, ready)
	stdin.Write([]byte{'\n'})
	var out strings.Builder
	child := 0
	sc := bufio.NewScanner(stdout)
	for child == 0 && sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		fmt.Sscanf(sc.Text(), "held %d", &child)
	}
	if child == 0 {
		cmd.Wait()
		t.Fatalf("%s %s ended before its exit: %v\n%s%s", py.path, script, sc.Err(), out.String(), errOut.String())
	}
	h.waitExitsHandled(t, child)
	stdin.Write([]byte{'\n'})
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", py.path, script, err, out.String(), errOut.String())
	}
	h.waitExitsHeld(t, pid)
	h.cmd.Process.Signal(syscall.SIGINT)
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("memtrace: %v\n%s", err, h.errors())
	}
	var recs []hostPythonRecord
	sc = bufio.NewScanner(strings.NewReader(h.stdout.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r hostPythonRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.PID != pid {
			continue
		}
		if r.File == script && (!r.Python || r.Module != "python") {
			t.Errorf("%s record of %s:%d: python %v, module %q; want true, \"python\"", r.Type, r.File, r.Line, r.Python, r.Module)
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		t.Logf("memtrace's log:\n%s", h.errors())
	}
	if l := `msg="python lines not named" pid=` + strconv.Itoa(pid) + " "; strings.Contains(h.errors(), l) {
		// Read before it exited: every code object could be read.
		t.Errorf("memtrace logged %s", l)
	}
	return hostPythonRun{recs, script}
}

// TestPythonEverywhere: a Python run's lines go wherever call sites go.
// One run writes a recording, folded stacks, a pprof profile and the HTML
// report; the replay of the recording gives each Python line the live
// run's bytes, and each export names the script's functions.
func TestPythonEverywhere(t *testing.T) {
	needBPF(t)
	all := pythons(t)
	py := all[len(all)-1]
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "python", "keep.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec, live := filepath.Join(dir, "rec"), filepath.Join(dir, "live.ndjson")
	folded, pprofFile, html := filepath.Join(dir, "folded"), filepath.Join(dir, "heap.pb.gz"), filepath.Join(dir, "r.html")
	r := runMemtrace(t, "--record", rec, "--json-file", live, "--folded", folded, "--pprof", pprofFile, "--html", html,
		"--", py.path, script)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	replayed := runMemtrace(t, "replay", rec, "--json")
	if replayed.code != 0 {
		t.Fatalf("replay: exit %d\n%s", replayed.code, replayed.stderr)
	}
	js, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	lines := func(out string) map[string]uint64 {
		m := map[string]uint64{}
		for _, s := range parseNDJSON(t, out).sites {
			if s.Final && s.Module == "python" && s.File == script {
				m[s.Function+":"+strconv.Itoa(s.Line)] += s.LiveBytes
			}
		}
		return m
	}
	want, got := lines(string(js)), lines(replayed.stdout)
	if len(want) < 5 || !maps.Equal(got, want) {
		t.Errorf("replayed Python lines %v, want the live run's %v", got, want)
	}
	if p := parseNDJSON(t, string(js)).finalProcess(t); p.LostEvents != 0 {
		// Not a failure: the replay holds what the live run saw, lost
		// events included (a loaded machine's reader falls behind).
		t.Logf("%d events lost", p.LostEvents)
	}
	prof, err := os.ReadFile(pprofFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"folded": folded, "html": html} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, fn := range []string{"load_rows", "render"} {
			if !bytes.Contains(b, []byte(fn)) {
				t.Errorf("%s names no %s", name, fn)
			}
		}
	}
	p, err := profile.Parse(bytes.NewReader(prof))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, fn := range p.Function {
		if fn.Filename == script {
			found[fn.Name] = true
		}
	}
	names := []string{"load_rows", "render", "<module>"}
	if py.inlined {
		// Charged pools only: the module's own lines make fewer objects
		// than fill one, and a profile without --detail keeps call sites.
		names = names[:2]
	}
	for _, fn := range names {
		if !found[fn] && !found[fn+".<locals>.<listcomp>"] {
			t.Errorf("the pprof profile has no function %s of %s: %v", fn, script, found)
		}
	}
}
