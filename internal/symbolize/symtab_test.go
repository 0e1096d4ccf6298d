package symbolize

import (
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestReadFuncsMatchesDebugElf: readFuncs finds the same function symbols
// as debug/elf's tables through collectFuncs, on real files of both kinds
// (with and without .symtab) and on this test's own binary.
func TestReadFuncsMatchesDebugElf(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{self, "/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/sqlite3", "/usr/bin/node"}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v", p, err)
			}
			t.Logf("%s: %v (not installed)", p, err)
			continue
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := elf.Open(real)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, tab := range []struct {
				typ  elf.SectionType
				read func() ([]elf.Symbol, error)
			}{{elf.SHT_SYMTAB, f.Symbols}, {elf.SHT_DYNSYM, f.DynamicSymbols}} {
				syms, wantErr := tab.read()
				want := collectFuncs(nil, syms)
				got, err := readFuncs(nil, f, tab.typ)
				if (err == nil) != (wantErr == nil) {
					t.Fatalf("%v: error %v, debug/elf's %v", tab.typ, err, wantErr)
				}
				if len(got) != len(want) {
					t.Fatalf("%v: %d functions, debug/elf's %d", tab.typ, len(got), len(want))
				}
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Fatalf("%v: function %d = %+v, debug/elf's %+v", tab.typ, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestCString: a name that points outside its string table, or runs off
// its end, is empty, as debug/elf reads it (and its symbol is dropped).
func TestCString(t *testing.T) {
	strs := []byte("\x00good\x00bad")
	tests := []struct {
		off  int
		want string
	}{{1, "good"}, {6, ""}, {100, ""}, {-1, ""}}
	for _, tc := range tests {
		if got := string(cString(strs, tc.off)); got != tc.want {
			t.Errorf("cString(%d) = %q, want %q", tc.off, got, tc.want)
		}
	}
}
