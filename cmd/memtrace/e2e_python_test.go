package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
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
	// fast path into its callers, where no probe sees it: only the calls
	// that reach PyObject_Malloc's own code are blocks.
	inlined bool
}

// pythons lists the interpreters to test on; under CI=true Debian's
// python3.11 must be one.
func pythons(t *testing.T) []interpreter {
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
			jsonFile := filepath.Join(t.TempDir(), "out.ndjson")
			r := runMemtrace(t, "--json-file", jsonFile, "--", py.path, script)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			js, err := os.ReadFile(jsonFile)
			if err != nil {
				t.Fatal(err)
			}
			rep := parseNDJSON(t, string(js))
			p := rep.finalProcess(t)
			ratio := float64(p.LiveBytes) / float64(want)
			t.Logf("live %d bytes, tracemalloc %d: %.3fx; anon mmap live %d", p.LiveBytes, want, ratio, p.Mmap.LiveBytes)
			if py.inlined {
				// Only the calls into PyObject_Malloc's own code are seen.
				if p.LiveAllocs < 10000 {
					t.Errorf("%d live blocks, want pymalloc's (>= 10000)", p.LiveAllocs)
				}
			} else {
				if ratio < 0.8 || ratio > 1.25 {
					t.Errorf("live heap %d bytes is %.3fx tracemalloc's %d, want 0.8x to 1.25x", p.LiveBytes, ratio, want)
				}
				if p.Mmap.LiveBytes > 1<<20 {
					t.Errorf("anon mmap live %d bytes: pymalloc's arenas are the heap's, not mmap call sites", p.Mmap.LiveBytes)
				}
			}
			if !strings.Contains(r.stdout, "not judged (Python's garbage collector owns them)") {
				t.Errorf("the leak check does not say it leaves pymalloc's blocks alone:\n%s", r.stdout)
			}
		})
	}
}
