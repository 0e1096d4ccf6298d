package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Seeds live in testdata/fuzz/Fuzz*/: small ELF files made with gcc
// (static and shared, DWARF 5 and zlib-compressed DWARF 4), truncations of
// them, inputs the fuzzer found (a DWARF 5 line header with a huge
// directory count, which made debug/dwarf allocate without bound; a number
// cut short at the end of .debug_info, on which debug/dwarf's reader stops
// advancing), and maps text. inline-dwarf5 is tinyinl.c below, with an
// inlined call; minidebuginfo a stripped library whose .gnu_debugdata
// names its local function; FuzzMiniDebugInfo's seeds are that xz stream,
// cut short, and with a 4 GiB dictionary. Both libraries are built with
//
//	gcc -O2 [-g] -shared -fPIC -nostdlib -Wl,--build-id=none \
//	    -fno-asynchronous-unwind-tables -Wl,-z,noseparate-code \
//	    -Wl,-z,max-page-size=16 -Wl,-z,common-page-size=16 -Wl,-z,norelro
//
// tinyinl.c:
//
//	__attribute__((noinline)) int leaf(int x) { return x + 1; }
//	static inline __attribute__((always_inline)) int mid(int x) { return leaf(x) * 3; }
//	int top(int x) { return mid(x) + 1; }
//
// tinymini.c (without -g; MiniDebugInfo by objcopy --only-keep-debug, xz,
// strip --strip-all, objcopy --add-section .gnu_debugdata=):
//
//	static __attribute__((noinline)) int hidden(int x) { return x * 7; }
//	int api(int x) { return hidden(x) + 1; }

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
			for _, a := range []uint64{off, va, va + 1} {
				m.Function(a)
				m.Line(a)
				m.siteAt(a) // call decoding, inline chains
			}
		}
		m.DebugFile()
	})
}

// FuzzMiniDebugInfo: an xz stream from .gnu_debugdata, unpacked and read
// as an ELF file's symbols.
func FuzzMiniDebugInfo(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\xfd7zXZ\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ef, err := unpackMiniDebugInfo(in)
		if err != nil {
			return
		}
		syms, _ := functionSymbols(ef, nil)
		newSymbolTable(syms).lookup(0x1000)
	})
}

// FuzzDebugLink: the .gnu_debuglink section's contents.
func FuzzDebugLink(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		l, ok := parseDebugLink(in, binary.LittleEndian)
		if ok && (!plainFileName(l.name) || l.name == "") {
			t.Errorf("accepted name %q", l.name)
		}
		for _, c := range debugCandidatePaths("", l, "/usr/bin/prog", []string{"/usr/lib/debug"}) {
			if !strings.HasPrefix(c.path, "/usr/") {
				t.Errorf("candidate %q outside the directories searched", c.path)
			}
		}
	})
}

// The inline seed's call from top, in mid's inlined code, has mid's chain;
// the MiniDebugInfo seed names its local function.
func TestNewParserSeeds(t *testing.T) {
	inl, err := NewModule(bytes.NewReader(readSeed(t, "testdata/fuzz/FuzzModule/inline-dwarf5")))
	if err != nil {
		t.Fatal(err)
	}
	if err := inl.Load(); err != nil {
		t.Fatal(err)
	}
	var top symbol
	for _, s := range inl.syms.syms {
		if s.name == "top" {
			top = s
		}
	}
	var chain []InlineFrame
	for a := top.addr; a < top.addr+top.size && chain == nil; a++ {
		if s := inl.siteAt(a); s.call != a-1 && len(s.inlined) > 0 {
			chain = s.inlined
		}
	}
	var got []string
	for _, c := range chain {
		got = append(got, c.Function+" "+filepath.Base(c.File)+":"+strconv.Itoa(c.Line))
	}
	if want := []string{"mid tinyinl.c:2", "top tinyinl.c:3"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("inline chain %q, want %q", got, want)
	}

	mini, err := NewModule(bytes.NewReader(readSeed(t, "testdata/fuzz/FuzzModule/minidebuginfo")))
	if err != nil {
		t.Fatal(err)
	}
	if err := mini.Load(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range mini.syms.syms {
		found = found || s.name == "hidden" && mini.Function(s.addr) == "hidden"
	}
	if !found {
		t.Errorf("MiniDebugInfo does not name hidden: %+v", mini.syms.syms)
	}
	if _, err := unpackMiniDebugInfo(readSeed(t, "testdata/fuzz/FuzzMiniDebugInfo/huge-dictionary")); err == nil || !strings.Contains(err.Error(), "dictionary") {
		t.Errorf("huge dictionary: %v", err)
	}
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

// FuzzNames: symbol names come from the traced program's binaries; the
// demangler and the shortening of names take any bytes, and shortening
// never makes a name longer in characters (an elided list is "…").
func FuzzNames(f *testing.F) {
	f.Add("_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_")
	f.Add("_RNvCs1234_5hello4main")
	f.Add("<Vec<u8> as Drop>::drop(operator<<(int)")
	f.Fuzz(func(t *testing.T, in string) {
		d := demangleName(in)
		for _, n := range []string{in, d} {
			for _, detail := range []NameDetail{FullName, NoTemplateArgs, NoTemplateArgsOrParams} {
				if s := ShortName(n, detail); utf8.RuneCountInString(s) > utf8.RuneCountInString(n) {
					t.Fatalf("ShortName(%q, %v) = %q: longer", n, detail, s)
				}
			}
		}
	})
}

// FuzzPerfMap: any text parses without a panic, within its bounds, and
// what is used ends at a line's end. Seeds: node's, the JVM's and .NET's
// lines, a line cut short, junk.
func FuzzPerfMap(f *testing.F) {
	f.Add([]byte("7f71fc0067c0 688 JS:*buildLedger /path/app.js:4:21\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		syms, used, _, err := ParsePerfMap(data)
		if used > len(data) || (used > 0 && data[used-1] != '\n') {
			t.Fatalf("used %d of %d bytes, not at a line's end", used, len(data))
		}
		for _, s := range syms {
			if s.Size == 0 || s.Start+s.Size < s.Start || len(s.Name) > maxJITName || s.Name == "" {
				t.Fatalf("bad symbol %+v", s)
			}
		}
		_ = err
	})
}

// FuzzJitDump: any file parses without a panic, reading as it grows gives
// the symbols a single read gives, and no symbol breaks the bounds. Seeds:
// a header, code loads in both byte orders, a record cut short.
func FuzzJitDump(f *testing.F) {
	le := binary.LittleEndian
	f.Add(jitdumpFile(le, codeLoadRecord(le, 0x1000, 0x10, "a")))
	f.Fuzz(func(t *testing.T, data []byte) {
		var whole JITDump
		all, err := whole.Next(bytes.NewReader(data), int64(len(data)))
		for _, s := range all {
			if s.Size == 0 || s.Start+s.Size < s.Start || len(s.Name) > maxJITName || s.Name == "" {
				t.Fatalf("bad symbol %+v", s)
			}
		}
		if err != nil {
			return
		}
		var parts JITDump
		half, err1 := parts.Next(bytes.NewReader(data), int64(len(data)/2))
		rest, err2 := parts.Next(bytes.NewReader(data), int64(len(data)))
		if err1 != nil || err2 != nil {
			t.Fatalf("in two reads: %v, %v; in one: no error", err1, err2)
		}
		if got := append(half, rest...); len(got) != len(all) {
			t.Fatalf("in two reads %d symbols, in one %d", len(got), len(all))
		}
	})
}
