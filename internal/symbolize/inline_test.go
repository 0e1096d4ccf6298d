package symbolize

import (
	"bufio"
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// siteTags maps NAME to the line marked "@site NAME" in a source under
// ../testdata.
func siteTags(t testing.TB, src string) map[string]int {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if _, after, ok := strings.Cut(sc.Text(), "@site "); ok {
			m[strings.Fields(after)[0]] = n
		}
	}
	return m
}

// calls returns the calls in function name of the ELF file at path: each
// call instruction's address and its end (the return address).
func calls(t testing.TB, path, name string) [][2]uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr, size := elfSymbol(t, path, name)
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr+size > p.Vaddr+p.Filesz {
			continue
		}
		code := make([]byte, size)
		if _, err := p.ReadAt(code, int64(addr-p.Vaddr)); err != nil {
			t.Fatal(err)
		}
		var out [][2]uint64
		for off := 0; off < len(code); {
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil {
				t.Fatalf("%s+%#x: %v", name, off, err)
			}
			if inst.Op == x86asm.CALL {
				out = append(out, [2]uint64{addr + uint64(off), addr + uint64(off+inst.Len)})
			}
			off += inst.Len
		}
		return out
	}
	t.Fatalf("%s: %s in no segment", path, name)
	return nil
}

// The call in make_buffer, inlined into wrap_buffer, inlined into
// leak_inlined, resolves to leak_inlined with the three-deep chain; calls
// in no inlined code have none. DWARF 4 and 5 number files differently.
func TestInlineChainFixture(t *testing.T) {
	needTool(t, "gcc")
	src, err := filepath.Abs(filepath.Join("..", "..", "testdata", "inlined.c"))
	if err != nil {
		t.Fatal(err)
	}
	lines := siteTags(t, src)
	for _, flags := range [][]string{{"-gdwarf-5"}, {"-gdwarf-4"}, {"-gdwarf-5", "-fno-pie", "-no-pie", "-fno-omit-frame-pointer"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			dir := tempDir(t)
			bin := filepath.Join(dir, "inlined")
			run(t, "gcc", append([]string{"-O2", "-g", "-o", bin, src}, flags...)...)
			m, err := OpenModule(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()

			cs := calls(t, bin, "leak_inlined")
			if len(cs) != 1 {
				t.Fatalf("leak_inlined has %d calls, want 1", len(cs))
			}
			for range 2 { // the second time from the cache
				s := m.siteAt(cs[0][1])
				if s.call != cs[0][0] || s.function != "leak_inlined" || s.file != src || s.line != lines["make_buffer"] {
					t.Errorf("site %+v, want the call at %#x in leak_inlined at %s:%d", *s, cs[0][0], src, lines["make_buffer"])
				}
				want := []InlineFrame{
					{Function: "make_buffer", File: src, Line: lines["make_buffer"]},
					{Function: "wrap_buffer", File: src, Line: lines["wrap_buffer"]},
					{Function: "leak_inlined", File: src, Line: lines["leak_inlined"]},
				}
				if !reflect.DeepEqual(s.inlined, want) {
					t.Errorf("inlined %+v, want %+v", s.inlined, want)
				}
			}
			for _, fn := range []string{"leak_direct", "leak_static"} {
				for _, c := range calls(t, bin, fn) {
					s := m.siteAt(c[1])
					if s.call != c[0] || s.function != fn || s.line != lines[fn] || len(s.inlined) != 0 {
						t.Errorf("%s: site %+v, want the call at %#x, line %d, no inline chain", fn, *s, c[0], lines[fn])
					}
				}
			}
			if err := m.Load(); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

// GCC's partial inlining undone: new_str's outlined tail, inlined back
// into new_str, is no frame of the chain (it was "new_str (inlined in
// new_str)", as Python 3.11's PyUnicode_New was). With -fno-partial-inlining
// GCC emits no such entry, and the site reads the same.
func TestInlineSplitBack(t *testing.T) {
	needTool(t, "gcc")
	src, err := filepath.Abs(filepath.Join("..", "..", "testdata", "symbolize", "splitback.c"))
	if err != nil {
		t.Fatal(err)
	}
	lines := siteTags(t, src)
	// With -flto the function's abstract entry is in another unit than its code.
	for _, flags := range [][]string{{"-O2"}, {"-O3"}, {"-O2", "-gdwarf-4"}, {"-O2", "-flto"}, {"-O2", "-fno-partial-inlining"}} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			lib := filepath.Join(tempDir(t), "libsplitback.so")
			run(t, "gcc", append([]string{"-g", "-fPIC", "-shared", "-o", lib, src}, flags...)...)
			m, err := OpenModule(lib)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var mallocs int
			for _, c := range calls(t, lib, "new_str") {
				s := m.siteAt(c[1])
				if s.line != lines["new_str"] {
					continue // memset's call, or none
				}
				mallocs++
				if s.call != c[0] || s.function != "new_str" || s.file != src || len(s.inlined) != 0 {
					t.Errorf("site %+v, want the call at %#x in new_str at %s:%d, no inline chain", *s, c[0], src, lines["new_str"])
				}
			}
			if mallocs != 1 {
				t.Errorf("%d calls at line %d in new_str, want 1 (malloc's)", mallocs, lines["new_str"])
			}
		})
	}
}

// C++: the inline chain names functions by their linkage names, demangled,
// through DW_AT_abstract_origin and DW_AT_specification.
func TestInlineChainCXX(t *testing.T) {
	needTool(t, "g++")
	src, err := filepath.Abs(filepath.Join("..", "..", "testdata", "inlined.cc"))
	if err != nil {
		t.Fatal(err)
	}
	lines := siteTags(t, src)
	dir := tempDir(t)
	bin := filepath.Join(dir, "inlinedcc")
	run(t, "g++", "-O2", "-g", "-o", bin, src)
	m, err := OpenModule(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cs := calls(t, bin, "_Z13leak_templatev")
	if len(cs) != 1 {
		t.Fatalf("leak_template has %d calls, want 1", len(cs))
	}
	s := m.siteAt(cs[0][1])
	want := []InlineFrame{
		{Function: "store::Pool<long>::grab(unsigned long)", File: src, Line: lines["grab"]},
		{Function: "leak_template()", File: src, Line: lines["leak_template"]},
	}
	if s.function != "leak_template()" || !reflect.DeepEqual(s.inlined, want) {
		t.Errorf("site %+v, want leak_template() with %+v", *s, want)
	}
}

// testModule is a module with one executable segment [0x1000, 0x2000) for
// the call decoding.
func testModule() *Module {
	return &Module{execSegs: []segment{{vaddr: 0x1000, filesz: 0x1000}}}
}

func TestCallsEndingAt(t *testing.T) {
	m := testModule()
	const ret = 0x1800
	rel := func(target uint64) []byte { // e8 rel32 to target, ending at ret
		d := int32(int64(target) - ret)
		return []byte{0xe8, byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24)}
	}
	tests := []struct {
		name  string
		code  []byte // ends at ret
		start int    // where the call starts in code, -1: no call
	}{
		{"call rel32 into the module", append([]byte{0x90, 0x90}, rel(0x1100)...), 2},
		{"call rel32 outside the module", append([]byte{0x90, 0x90}, rel(0x9000)...), -1},
		{"call *%rax", []byte{0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0}, 5},
		{"call *%r11", []byte{0x90, 0x90, 0x90, 0x90, 0x41, 0xff, 0xd3}, 4},
		{"call *0x10(%rip)", []byte{0x90, 0xff, 0x15, 0x10, 0, 0, 0}, 1},
		{"call *(%rax)", []byte{0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0x10}, 5},
		{"call *0x8(%rbx)", []byte{0x90, 0x90, 0x90, 0x90, 0xff, 0x53, 0x08}, 4},
		{"call *0x8(%rsp)", []byte{0x90, 0x90, 0x90, 0xff, 0x54, 0x24, 0x08}, 3},
		{"notrack call *%rax", []byte{0x90, 0x90, 0x90, 0x90, 0x3e, 0xff, 0xd0}, 4},
		{"jmp *%rax is no call", []byte{0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0}, -1},
		{"nops", []byte{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, -1},
	}
	for _, tc := range tests {
		starts := m.callsEndingAt(tc.code, ret)
		if tc.start < 0 && len(starts) != 0 || tc.start >= 0 && (len(starts) != 1 || starts[0] != tc.start) {
			t.Errorf("%s: callsEndingAt = %v; want [%d]", tc.name, starts, tc.start)
		}
	}
}

// Bytes that fit two encodings: callsEndingAt offers both, E8 first, and
// callInsn then decodes the function to choose.
func TestCallsEndingAtAmbiguous(t *testing.T) {
	m := &Module{execSegs: []segment{{vaddr: 0, filesz: 1 << 40}}}
	// e8 with rel32 0xff50ff00 (backwards, into code of this huge module),
	// whose last three bytes are also call *-1(%rax).
	code := []byte{0x90, 0x90, 0xe8, 0x00, 0xff, 0x50, 0xff}
	if got := m.callsEndingAt(code, 1<<36); !reflect.DeepEqual(got, []int{2, 4}) {
		t.Errorf("callsEndingAt = %v, want [2 4]", got)
	}
}

func TestLastInstruction(t *testing.T) {
	tests := []struct {
		name string
		code []byte
		want decoded
		ok   bool
	}{
		// endbr64; sub $8,%rsp; call rel32
		{"call last", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08, 0xe8, 1, 2, 3, 4}, decoded{start: 8, call: true}, true},
		// endbr64; call *%rax
		{"indirect call", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0xd0}, decoded{start: 4, call: true}, true},
		// endbr64; nop
		{"no call", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x90}, decoded{start: 4}, true},
		// a call rel32 cut short: decoding does not land on the end
		{"misaligned", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xe8, 0x01}, decoded{}, false},
		{"empty", nil, decoded{}, false},
	}
	for _, tc := range tests {
		got, ok := lastInstruction(tc.code)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: lastInstruction = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
