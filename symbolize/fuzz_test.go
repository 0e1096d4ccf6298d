package symbolize

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Seeds live in testdata/fuzz/Fuzz*/: small ELF files made with gcc
// (static and shared, DWARF 5 and zlib-compressed DWARF 4), truncations of
// them, inputs the fuzzer found (a DWARF 5 line header with a huge
// directory count, which made debug/dwarf allocate without bound; a number
// cut short at the end of .debug_info, on which debug/dwarf's reader stops
// advancing), and maps text.

func FuzzParseMaps(f *testing.F) {
	f.Add("")
	f.Add("10-20 r-xp 00000000 00:00 0 [vdso]\n")
	f.Fuzz(func(t *testing.T, in string) {
		maps, err := ParseMaps(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "parse maps line ") && !strings.HasPrefix(err.Error(), "read maps ") {
				t.Errorf("error without context: %v", err)
			}
			return
		}
		for _, m := range maps {
			if m.End < m.Start || len(m.Perms) != 4 || strings.HasSuffix(m.Path, deletedSuffix) && !m.Pseudo() {
				t.Errorf("bad mapping %+v", m)
			}
		}
	})
}

func FuzzModule(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := NewModule(bytes.NewReader(in))
		if err != nil {
			return
		}
		m.BuildID()
		m.Load()
		// Addresses at and inside each segment, and a few fixed ones.
		offs := []uint64{0, 1, 0x1000, uint64(len(in) / 2), ^uint64(0)}
		for _, s := range m.segs {
			offs = append(offs, s.off, s.off+s.filesz/2, s.off+s.filesz-1)
		}
		for _, off := range offs {
			va, _ := m.VAddr(off)
			for _, a := range []uint64{off, va} {
				m.Function(a)
				m.Line(a)
			}
		}
	})
}

// readSeed decodes a []byte seed of the Go fuzz corpus format.
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, lit, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	lit = strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")")
	s, err := strconv.Unquote(lit)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// The valid seeds are real modules: they must resolve, not merely not
// crash. tiny.c defines bump on its line 2.
func TestModuleSeeds(t *testing.T) {
	for _, name := range []string{"static-exec-dwarf5", "shared-lib-dwarf5", "zlib-dwarf4"} {
		t.Run(name, func(t *testing.T) {
			in := readSeed(t, filepath.Join("testdata/fuzz/FuzzModule", name))
			ef, err := elf.NewFile(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			syms, err := ef.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			var bump elf.Symbol
			for _, s := range syms {
				if s.Name == "bump" {
					bump = s
				}
			}
			m, err := NewModule(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Load(); err != nil {
				t.Fatal(err)
			}
			if got := m.Function(bump.Value + 1); got != "bump" {
				t.Errorf("Function(%#x) = %q, want bump", bump.Value+1, got)
			}
			file, line := m.Line(bump.Value)
			if filepath.Base(file) != "tiny.c" || line != 2 {
				t.Errorf("Line(%#x) = %s:%d, want tiny.c:2", bump.Value, file, line)
			}
		})
	}
}
