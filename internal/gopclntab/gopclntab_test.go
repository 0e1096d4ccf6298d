package gopclntab

import (
	"debug/elf"
	"debug/gosym"
	"errors"
	"os"
	"testing"
)

// testBinary opens the running test, a Go executable.
func testBinary(t *testing.T) *elf.File {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// inlinedTable is f's table with its inline trees looked for, as symbolize reads it.
func inlinedTable(t *testing.T, f *elf.File) *Table {
	t.Helper()
	tab, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	tab.FindInlineTrees(f)
	return tab
}

// gosymTable reads f's table with the standard library, to compare with.
func gosymTable(t *testing.T, f *elf.File) *gosym.Table {
	t.Helper()
	data, err := f.Section(".gopclntab").Data()
	if err != nil {
		t.Fatal(err)
	}
	want, err := gosym.NewTable(nil, gosym.NewLineTable(data, f.Section(".text").Addr))
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestFuncsMatchGosym: every function's name and range, as the standard
// library's reader of the same table gives them.
func TestFuncsMatchGosym(t *testing.T) {
	f := testBinary(t)
	tab, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	want := gosymTable(t, f)
	if len(tab.Funcs) != len(want.Funcs) || len(tab.Funcs) < 1000 {
		t.Fatalf("%d functions, gosym reads %d", len(tab.Funcs), len(want.Funcs))
	}
	for i, fn := range tab.Funcs {
		w := want.Funcs[i]
		if fn.Name != w.Name || fn.Entry != w.Entry || fn.End != w.End {
			t.Fatalf("function %d: %s [%#x, %#x), gosym: %s [%#x, %#x)", i, fn.Name, fn.Entry, fn.End, w.Name, w.Entry, w.End)
		}
	}
}

// TestSPDeltas: the offsets of functions whose frames are known: a
// function's first instruction runs with only the return address pushed
// (offset 0), ranges follow one another, and every offset is a multiple of
// 8 (negative in assembly that pops its return address, such as
// syscall.rawVforkSyscall).
func TestSPDeltas(t *testing.T) {
	tab, err := Read(testBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	var framed int
	for _, fn := range tab.Funcs {
		sp, err := tab.SPDeltas(fn)
		if err != nil {
			t.Fatal(err)
		}
		if len(sp) == 0 {
			continue
		}
		if sp[0].PC != fn.Entry || sp[0].Delta != 0 {
			t.Fatalf("%s starts at %#x with offset %d, want %#x and 0", fn.Name, sp[0].PC, sp[0].Delta, fn.Entry)
		}
		for i, r := range sp {
			if r.End <= r.PC || (i > 0 && r.PC != sp[i-1].End) || r.Delta%8 != 0 {
				t.Fatalf("%s: range %d %+v after %+v", fn.Name, i, r, sp[max(i-1, 0)])
			}
			if r.Delta > 0 {
				framed++
			}
		}
	}
	if framed < 1000 {
		t.Fatalf("only %d ranges inside a frame", framed)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"go 1.16 table", []byte{0xfa, 0xff, 0xff, 0xff, 0, 0, 1, 8}, ErrVersion},
		{"32-bit", []byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 4}, ErrVersion},
		{"header cut short", []byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8, 1}, ErrMalformed},
		{"function count past the end", append([]byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8, 0xff, 0xff, 0xff}, make([]byte, 61)...), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.data, 0x401000); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzParse: no input panics, and every function read has its offsets
// within the input.
func FuzzParse(f *testing.F) {
	ef, err := elf.Open("/proc/self/exe")
	if err == nil {
		if data, err := ef.Section(".gopclntab").Data(); err == nil && len(data) > 4096 {
			f.Add(data[:4096])
		}
		ef.Close()
	}
	f.Add([]byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Parse(data, 0x401000)
		if err != nil {
			return
		}
		for _, fn := range tab.Funcs {
			if _, err := tab.SPDeltas(fn); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: %v", fn.Name, err)
			}
			tab.Line(fn.Entry)
			tab.Inlined(fn.Entry)
		}
	})
}

// TestLineMatchesGosym: the file and line of every instruction start the
// table gives a line for are the standard library's, and most of the
// code has one (the rest is inlined code, which gets none).
func TestLineMatchesGosym(t *testing.T) {
	f := testBinary(t)
	tab := inlinedTable(t, f)
	want := gosymTable(t, f)
	var own, all int
	for _, fn := range tab.Funcs {
		for pc := fn.Entry; pc < fn.End; pc += max(1, (fn.End-fn.Entry)/7) {
			all++
			file, line, ok := tab.Line(pc)
			if !ok {
				continue
			}
			own++
			wf, wl, _ := want.PCToLine(pc)
			if file != wf || line != wl {
				t.Fatalf("%s at %#x: %s:%d, gosym %s:%d", fn.Name, pc, file, line, wf, wl)
			}
		}
	}
	if own < all/2 {
		t.Fatalf("a line for %d of %d pcs", own, all)
	}
	t.Logf("a line for %d of %d pcs", own, all)
	if g, ok := tab.Func(tab.Funcs[10].Entry + 1); !ok || g.Name != tab.Funcs[10].Name {
		t.Fatalf("Func(%#x) = %s, %v", tab.Funcs[10].Entry+1, g.Name, ok)
	}
}

// TestInlineTrees: the inline trees are found in a Go 1.26 binary, and a
// gofunc off by a few bytes (a module data of another layout) fails the
// plausibility check, so that no inlined call is ever misnamed.
func TestInlineTrees(t *testing.T) {
	tab := inlinedTable(t, testBinary(t))
	if tab.gofunc == nil {
		t.Fatal("no inline trees found")
	}
	var inlined int
	for _, fn := range tab.Funcs {
		for pc := fn.Entry; pc < fn.End; pc += 8 {
			if c := tab.Inlined(pc); len(c) > 0 {
				if len(c) < 2 || c[len(c)-1].Function != fn.Name {
					t.Fatalf("%s at %#x: chain %v", fn.Name, pc, c)
				}
				inlined++
			}
		}
	}
	if inlined < 1000 {
		t.Fatalf("only %d inlined pcs", inlined)
	}
	for _, shift := range []int{4, 8, 12} {
		bad := *tab
		bad.gofunc = tab.gofunc[shift:]
		if bad.plausibleTrees() {
			t.Errorf("gofunc %d bytes off passes", shift)
		}
	}
}
