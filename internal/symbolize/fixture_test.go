package symbolize

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixtureDir holds the C sources the tests compile.
const fixtureDir = "../../testdata/symbolize"

// needTool skips the test when a build tool is missing.
func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
}

// tempDir is t.TempDir with symlinks resolved, so that paths match what
// /proc/PID/maps shows.
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// run runs a build tool and fails the test with its output on error.
func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// tagLine returns the line of src that holds the comment /* tag */.
func tagLine(t testing.TB, src, tag string) int {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "/* "+tag+" */") {
			return i + 1
		}
	}
	t.Fatalf("%s: no line tagged %s", src, tag)
	return 0
}

// fixture is a running fixture process.
type fixture struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	// addrs holds, per tag, the addresses printed so far.
	addrs map[string][]uint64
}

// startFixture runs bin with args and reads its output up to READY1.
func startFixture(t testing.TB, bin string, args ...string) *fixture {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), addrs: map[string][]uint64{}}
	t.Cleanup(func() {
		f.stdin.Close()
		f.cmd.Process.Kill()
		f.cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("fixture stderr:\n%s", stderr.String())
		}
	})
	f.readUntil("READY1")
	return f
}

// readUntil collects "TAG 0xADDR" lines until the line want.
func (f *fixture) readUntil(want string) {
	f.t.Helper()
	for {
		line, err := f.out.ReadString('\n')
		if err != nil {
			f.t.Fatalf("fixture output before %s: %v", want, err)
		}
		line = strings.TrimSpace(line)
		if line == want {
			return
		}
		tag, hex, ok := strings.Cut(line, " ")
		if !ok {
			f.t.Fatalf("fixture printed %q", line)
		}
		a, err := strconv.ParseUint(strings.TrimPrefix(hex, "0x"), 16, 64)
		if err != nil {
			f.t.Fatalf("fixture printed %q: %v", line, err)
		}
		f.addrs[tag] = append(f.addrs[tag], a)
	}
}

// proceed lets the fixture load its library (if any) and reads up to READY2.
func (f *fixture) proceed() {
	f.t.Helper()
	if _, err := io.WriteString(f.stdin, "\n"); err != nil {
		f.t.Fatal(err)
	}
	f.readUntil("READY2")
}

// finish closes the fixture's input and waits for it to exit.
func (f *fixture) finish() {
	f.t.Helper()
	f.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			f.t.Fatalf("fixture exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		f.t.Fatal("fixture did not exit")
	}
}

// addr returns the one address printed for tag.
func (f *fixture) addr(tag string) uint64 {
	f.t.Helper()
	a := f.addrs[tag]
	if len(a) != 1 {
		f.t.Fatalf("fixture printed %d addresses for %s, want 1", len(a), tag)
	}
	return a[0]
}

func (f *fixture) pid() int { return f.cmd.Process.Pid }

// buildFixture compiles leak.c with cflags into dir and returns the binary.
func buildFixture(t testing.TB, dir, name string, cflags ...string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	args := append(append([]string{}, cflags...), "-o", bin, filepath.Join(fixtureDir, "leak.c"))
	run(t, "gcc", args...)
	return bin
}

// buildLibrary compiles leaklib.c into a shared library in dir.
func buildLibrary(t testing.TB, dir, name string) string {
	t.Helper()
	lib := filepath.Join(dir, name)
	run(t, "gcc", "-O2", "-g", "-shared", "-fPIC", "-o", lib, filepath.Join(fixtureDir, "leaklib.c"))
	return lib
}

// stripCopy copies bin to a new name and strips it of all symbols.
func stripCopy(t testing.TB, bin, name string) string {
	t.Helper()
	out := filepath.Join(filepath.Dir(bin), name)
	run(t, "strip", "--strip-all", "-o", out, bin)
	return out
}

func showFrame(f Frame) string {
	s := fmt.Sprintf("{%#x call=%#x %q %q:%d %q off=%#x", f.Address, f.CallAddress, f.Function, f.File, f.Line, f.Module, f.Offset)
	for _, in := range f.Inlined {
		s += fmt.Sprintf(" [%s %s:%d]", in.Function, in.File, in.Line)
	}
	return s + "}"
}

// sameFrame compares frames field by field, inline chains included.
func sameFrame(a, b Frame) bool {
	if len(a.Inlined) == 0 && len(b.Inlined) == 0 {
		a.Inlined, b.Inlined = nil, nil
	}
	return reflect.DeepEqual(a, b)
}
