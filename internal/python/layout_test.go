package python

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFromFile reads the installed interpreters' layouts from their files:
// the version, and 3.13's offsets from its _Py_DebugOffsets, which must
// agree with those its debug information gives (checked with gdb's
// ptype /o when this was written).
func TestFromFile(t *testing.T) {
	home, _ := os.UserHomeDir()
	pyenv := filepath.Join(home, ".pyenv", "versions")
	tests := []struct {
		path         string
		minor        int
		tstateFrame  uint32
		cframe       int32
		frame        Frame
		adaptive     uint32
		requiredInCI bool
	}{
		{"/usr/bin/python3.11", 11, 56, 8, Frame{Code: 32, Prev: 48, Instr: 56, Entry: 68}, 184, true},
		{filepath.Join(pyenv, "3.10.13/lib/libpython3.10.so.1.0"), 10, 24, -1, Frame{Code: 32, Prev: 24, Instr: 96}, 0, false},
		{filepath.Join(pyenv, "3.12.1/lib/libpython3.12.so.1.0"), 12, 56, 0, Frame{Code: 0, Prev: 8, Instr: 56, Entry: 70}, 192, false},
		{filepath.Join(pyenv, "3.13.0/lib/libpython3.13.so.1.0"), 13, 72, -1, Frame{Code: 0, Prev: 8, Instr: 56, Entry: 70}, 200, false},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			if _, err := os.Stat(tt.path); err != nil {
				if tt.requiredInCI && os.Getenv("CI") == "true" {
					t.Fatalf("CI=true but %v", err)
				}
				t.Skip(err)
			}
			l, err := fromFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if l.Major != 3 || l.Minor != tt.minor || l.TstateFrame != tt.tstateFrame || l.CFrameFrame != tt.cframe ||
				l.Frame != tt.frame || l.Code.Adaptive != tt.adaptive {
				t.Errorf("3.%d, tstate %d, cframe %d, frame %+v, code at %d; want 3.%d, %d, %d, %+v, %d",
					l.Minor, l.TstateFrame, l.CFrameFrame, l.Frame, l.Code.Adaptive,
					tt.minor, tt.tstateFrame, tt.cframe, tt.frame, tt.adaptive)
			}
		})
	}
}

// TestNotPython: a file without _PyRuntime is no interpreter.
func TestNotPython(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fromFile(exe); !errors.Is(err, ErrNotPython) {
		t.Fatalf("%s: %v, want ErrNotPython", exe, err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := CodeDealloc(f); !errors.Is(err, ErrNotPython) {
		t.Errorf("%s: code_dealloc: %v, want ErrNotPython", exe, err)
	}
}

// TestCodeMembers: each installed interpreter's PyCode_Type publishes the
// code object's members at the offsets of memtrace's layout; a layout
// with one offset wrong is refused.
func TestCodeMembers(t *testing.T) {
	eachInterpreter(t, func(t *testing.T, path string, f *elf.File) {
		l, err := fromFile(path) // checks the members
		if err != nil {
			t.Fatal(err)
		}
		syms, _ := f.DynamicSymbols()
		var codeType uint64
		for _, s := range syms {
			if s.Name == "PyCode_Type" {
				codeType = s.Value
			}
		}
		bad := *l
		bad.Code.Filename += 8
		if err := bad.checkMembers(f, codeType); !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("co_filename 8 bytes off: %v, want ErrUnknownVersion", err)
		}
	})
}

// interpreterFiles are Debian's python3.11 and pyenv's libpython3.1x.
func interpreterFiles() []string {
	home, _ := os.UserHomeDir()
	libs, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "3.1[0-3].*", "lib", "libpython3.*.so.1.0"))
	return append([]string{"/usr/bin/python3.11"}, libs...)
}

// needFile skips a test of a file not here, but for Debian's python3.11
// under CI=true.
func needFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if path == "/usr/bin/python3.11" && os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
}

// eachInterpreter runs test on each of interpreterFiles, opened, in a
// subtest of its own (needFile).
func eachInterpreter(t *testing.T, test func(t *testing.T, path string, f *elf.File)) {
	for _, path := range interpreterFiles() {
		t.Run(filepath.Base(path), func(t *testing.T) {
			needFile(t, path)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			test(t, path, f)
		})
	}
}

// TestCodeDealloc finds code_dealloc through PyCode_Type's tp_dealloc: in
// pyenv's builds, which keep their local symbols, it must be the one named
// code_dealloc; in Debian's stripped python3.11, somewhere in its code.
func TestCodeDealloc(t *testing.T) {
	eachInterpreter(t, func(t *testing.T, _ string, f *elf.File) {
		got, err := CodeDealloc(f)
		if err != nil {
			t.Fatal(err)
		}
		syms, err := f.Symbols()
		if err != nil {
			t.Logf("%#x; no .symtab to check it against", got)
			return
		}
		var want []uint64
		for _, s := range syms {
			if s.Name == "code_dealloc" && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				want = append(want, s.Value)
			}
		}
		if len(want) != 1 || got != want[0] {
			t.Errorf("code_dealloc at %#x, the symbol table says %#x", got, want)
		}
	})
}
