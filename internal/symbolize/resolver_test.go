package symbolize

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
)

// elfSymbol returns the value and size of the named symbol of the ELF file
// at path, from .symtab or .dynsym.
func elfSymbol(t testing.TB, path, name string) (value, size uint64) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	dyn, _ := f.DynamicSymbols()
	for _, s := range append(syms, dyn...) {
		if s.Name == name {
			return s.Value, s.Size
		}
	}
	t.Fatalf("%s: no symbol %s", path, name)
	return 0, 0
}

// baseFrame reduces File to its base name, as the assertions compare it.
func baseFrame(f Frame) Frame {
	if f.File != "" {
		f.File = filepath.Base(f.File)
	}
	return f
}

func TestResolveFixture(t *testing.T) {
	needTool(t, "gcc")
	needTool(t, "strip")
	src := filepath.Join(fixtureDir, "leak.c")
	libSrc := filepath.Join(fixtureDir, "leaklib.c")
	lineA, lineB, lineC := tagLine(t, src, "LEAK_A"), tagLine(t, src, "LEAK_B"), tagLine(t, src, "LEAK_C")
	lineLib := tagLine(t, libSrc, "LIB_LEAK")

	tests := []struct {
		name     string
		cflags   []string
		stripped bool // strip --strip-all the binary and the library
	}{
		{name: "O2", cflags: []string{"-O2", "-g"}},
		{name: "O0-no-pie", cflags: []string{"-O0", "-g", "-no-pie"}},
		{name: "O2-pie", cflags: []string{"-O2", "-g", "-fPIE", "-pie"}},
		{name: "O2-stripped", cflags: []string{"-O2", "-g"}, stripped: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			bin := buildFixture(t, dir, "leak", tc.cflags...)
			lib := buildLibrary(t, dir, "libleak.so")
			// Symbols are read from the unstripped files for the expectations.
			mainVaddr, _ := elfSymbol(t, bin, "main")
			libLeakVaddr, libLeakSize := elfSymbol(t, lib, "lib_leak")
			runBin, runLib := bin, lib
			if tc.stripped {
				runBin, runLib = stripCopy(t, bin, "leak-stripped"), stripCopy(t, lib, "libleak-stripped.so")
			}

			fx := startFixture(t, runBin, runLib)
			r := NewResolver()
			defer r.Close()
			// Captured before the library is loaded: resolving its address
			// must capture again by itself.
			if err := r.Capture(fx.pid()); err != nil {
				t.Fatal(err)
			}
			fx.proceed()
			bias := fx.addr("MAIN") - mainVaddr

			want := func(tag, fn, file string, line int) Frame {
				a := fx.addr(tag)
				// record is called with call rel32: 5 bytes before the return.
				f := Frame{Address: a, CallAddress: a - 5, Function: fn, File: file, Line: line, Module: runBin, Offset: a - 5 - bias}
				if tc.stripped {
					f.Function, f.File, f.Line = "", "", 0
				}
				return f
			}
			wants := []Frame{
				want("LEAK_A", "leak_a", "leak.c", lineA),
				want("LEAK_B", "leak_b", "leak.c", lineB),
				want("LEAK_C", "memtrace::leak_c()", "leak.c", lineC),
			}
			libWant := Frame{Address: fx.addr("LIB_LEAK"), Function: "lib_leak", File: "leaklib.c", Line: lineLib, Module: runLib}
			if tc.stripped {
				libWant.File, libWant.Line = "", 0 // still named, through .dynsym
			}

			check := func(when string) {
				t.Helper()
				for _, w := range wants {
					if got := baseFrame(r.Resolve(fx.pid(), w.Address)); !sameFrame(got, w) {
						t.Errorf("%s: Resolve(%#x) = %s, want %s", when, w.Address, showFrame(got), showFrame(w))
					}
				}
				got := baseFrame(r.Resolve(fx.pid(), libWant.Address))
				if got.Offset < libLeakVaddr || got.Offset >= libLeakVaddr+libLeakSize {
					t.Errorf("%s: library offset %#x outside lib_leak [%#x, +%#x)", when, got.Offset, libLeakVaddr, libLeakSize)
				}
				got.Offset, got.CallAddress = 0, 0
				if !sameFrame(got, libWant) {
					t.Errorf("%s: Resolve(%#x) = %s, want %s", when, libWant.Address, showFrame(got), showFrame(libWant))
				}
			}
			check("live")

			fx.finish()
			if err := r.Capture(fx.pid()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Capture after exit = %v, want os.ErrNotExist", err)
			}
			check("after exit")

			r.Forget(fx.pid())
			a := wants[0].Address
			if got := r.Resolve(fx.pid(), a); !sameFrame(got, Frame{Address: a}) {
				t.Errorf("after Forget: Resolve(%#x) = %s, want empty", a, showFrame(got))
			}
		})
	}
}

// A deleted executable still resolves: map_files reaches the mapped file.
func TestResolveDeletedModule(t *testing.T) {
	needTool(t, "gcc")
	if os.Geteuid() != 0 {
		t.Skip("reading /proc/PID/map_files needs root")
	}
	dir := tempDir(t)
	bin := buildFixture(t, dir, "leak-deleted", "-O2", "-g")
	fx := startFixture(t, bin)
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	r := NewResolver()
	defer r.Close()
	if err := r.Capture(fx.pid()); err != nil {
		t.Fatal(err)
	}
	a := fx.addr("LEAK_A")
	got := baseFrame(r.Resolve(fx.pid(), a))
	got.Offset, got.CallAddress = 0, 0
	want := Frame{Address: a, Function: "leak_a", File: "leak.c", Line: tagLine(t, filepath.Join(fixtureDir, "leak.c"), "LEAK_A"), Module: bin}
	if !sameFrame(got, want) {
		t.Errorf("Resolve(%#x) = %s, want %s", a, showFrame(got), showFrame(want))
	}
}

func TestResolveNoMapping(t *testing.T) {
	needTool(t, "gcc")
	dir := tempDir(t)
	bin := buildFixture(t, dir, "leak", "-O0", "-g")
	fx := startFixture(t, bin)
	r := NewResolver()
	defer r.Close()

	tests := []struct {
		name string
		pid  int
		ret  uint64
		want Frame
	}{
		{name: "zero", pid: fx.pid(), ret: 0, want: Frame{}},
		{name: "first page", pid: fx.pid(), ret: 0x10, want: Frame{Address: 0x10}},
		{name: "kernel half", pid: fx.pid(), ret: 0xffff_8000_0000_0000, want: Frame{Address: 0xffff_8000_0000_0000}},
		{name: "no such process", pid: deadPID(t), ret: 0x401000, want: Frame{Address: 0x401000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Twice: the second lookup takes the remembered-miss path.
			for range 2 {
				if got := r.Resolve(tc.pid, tc.ret); !sameFrame(got, tc.want) {
					t.Errorf("Resolve(%d, %#x) = %s, want %s", tc.pid, tc.ret, showFrame(got), showFrame(tc.want))
				}
			}
		})
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("run true: %v", err)
	}
	return cmd.Process.Pid
}

func TestCaptureGone(t *testing.T) {
	r := NewResolver()
	defer r.Close()
	pid := deadPID(t)
	err := r.Capture(pid)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Capture(%d) = %v, want os.ErrNotExist", pid, err)
	}
}

// An executable replaced on disk (a package upgrade renames a new file over
// it) still resolves from the file that is mapped, not the new one at its
// path.
func TestResolveReplacedModule(t *testing.T) {
	needTool(t, "gcc")
	if os.Geteuid() != 0 {
		t.Skip("reading /proc/PID/map_files needs root")
	}
	dir := tempDir(t)
	bin := buildFixture(t, dir, "leak", "-O2", "-g")
	mainVaddr, _ := elfSymbol(t, bin, "main")
	leakA, leakASize := elfSymbol(t, bin, "leak_a")
	fx := startFixture(t, bin)
	// The new version: built differently, renamed over the old path.
	next := buildFixture(t, tempDir(t), "leak-next", "-O0", "-g", "-fno-inline")
	if nextA, _ := elfSymbol(t, next, "leak_a"); nextA == leakA {
		t.Fatal("the new build has leak_a where the old one has it")
	}
	b, err := os.ReadFile(next)
	if err != nil {
		t.Fatal(err)
	}
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	r := NewResolver()
	defer r.Close()
	if err := r.Capture(fx.pid()); err != nil {
		t.Fatal(err)
	}
	a := fx.addr("LEAK_A")
	bias := fx.addr("MAIN") - mainVaddr
	got := baseFrame(r.Resolve(fx.pid(), a))
	want := Frame{Address: a, CallAddress: a - 5, Function: "leak_a", File: "leak.c",
		Line: tagLine(t, filepath.Join(fixtureDir, "leak.c"), "LEAK_A"), Module: bin, Offset: a - 5 - bias}
	if !sameFrame(got, want) || got.Offset < leakA || got.Offset >= leakA+leakASize {
		t.Errorf("Resolve(%#x) = %s, want %s", a, showFrame(got), showFrame(want))
	}
}

// TestPrepare: Prepare reads the symbols of every module of a captured
// process in the background, and leaves unknown processes alone.
func TestPrepare(t *testing.T) {
	r := NewResolver()
	defer r.Close()
	r.Prepare(os.Getpid()) // not captured: nothing to do
	if err := r.Capture(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	r.mu.RLock()
	var mods []*Module
	for _, m := range r.procs[os.Getpid()].maps {
		if m.mod != nil {
			mods = append(mods, m.mod)
		}
	}
	r.mu.RUnlock()
	if len(mods) == 0 {
		t.Fatal("no module captured in this test's own process")
	}
	r.Prepare(os.Getpid())
	testwait.For(t, "every module's symbols read", func() bool {
		for _, m := range mods {
			if !m.symsRead.Load() {
				return false
			}
		}
		return true
	})
	// The test binary's own function, named from the table read ahead.
	fn := reflect.ValueOf(TestPrepare).Pointer()
	if f := r.Resolve(os.Getpid(), uint64(fn)+1); !strings.Contains(f.Function, "TestPrepare") {
		t.Errorf("Resolve(TestPrepare+1) = %q, want TestPrepare", f.Function)
	}
}
