package unwind

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const (
	libc      = "/lib/x86_64-linux-gnu/libc.so.6"
	libstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
	libsqlite = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"
	// Large files from Debian packages, where installed (libllvm14, which
	// clang pulls in; chromium): tests and benchmarks skip them otherwise.
	libLLVM  = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
	chromium = "/usr/lib/chromium/chromium"
	node     = "/usr/bin/node"                                           // 98 MB, 2.7 MB .eh_frame
	libjvm   = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so" // 22 MB, 0.9 MB .eh_frame
)

var fixtureDir = filepath.Join("..", "..", "testdata", "unwind")

// debugFrameFlags make gcc write .debug_frame instead of .eh_frame.
var debugFrameFlags = []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}

func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
}

func needFile(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s: %v", path, err)
	}
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// compile builds testdata/unwind/src with gcc and flags into a temporary
// directory and returns the binary's path.
func compile(t testing.TB, src, name string, flags ...string) string {
	t.Helper()
	needTool(t, "gcc")
	bin := filepath.Join(t.TempDir(), name)
	run(t, "gcc", append(append([]string{}, flags...), "-o", bin, filepath.Join(fixtureDir, src))...)
	return bin
}

// openELF opens path for the rest of the test.
func openELF(t testing.TB, path string) *elf.File {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func buildFile(t testing.TB, path string) *Table {
	t.Helper()
	tab, err := Build(openELF(t, path))
	if err != nil {
		t.Fatalf("build %s: %v", path, err)
	}
	return tab
}

// TestReadelf compares every table row with binutils' interpretation.
func TestReadelf(t *testing.T) {
	needTool(t, "readelf")
	tests := []struct {
		name string
		file func(t *testing.T) string
	}{
		{"libc", func(t *testing.T) string { needFile(t, libc); return libc }},
		{"libstdc++", func(t *testing.T) string { needFile(t, libstdcxx); return libstdcxx }},
		{"libsqlite3", func(t *testing.T) string { needFile(t, libsqlite); return libsqlite }},
		{"libLLVM-14", func(t *testing.T) string { needFile(t, libLLVM); return libLLVM }},
		{"chromium", func(t *testing.T) string { needFile(t, chromium); return chromium }},
		{"omit-frame-pointer", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", "-O2", "-fomit-frame-pointer")
		}},
		{"frame-pointer", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", "-O2", "-fno-omit-frame-pointer")
		}},
		{"ibt-plt", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", "-O2", "-fcf-protection=full", "-Wl,-z,ibtplt")
		}},
		{"O0", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", "-O0")
		}},
		{"debug_frame only", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", append(debugFrameFlags, "-nostartfiles", "-e", "main")...)
		}},
		// The C runtime's objects bring .eh_frame, frames.c .debug_frame.
		{"eh_frame and debug_frame", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", debugFrameFlags...)
		}},
		{"compressed debug_frame (zlib)", func(t *testing.T) string {
			return compile(t, "frames.c", "frames", append(debugFrameFlags, "-gz=zlib")...)
		}},
		{"compressed debug_frame (zstd)", func(t *testing.T) string {
			needTool(t, "objcopy")
			bin := compile(t, "frames.c", "frames", debugFrameFlags...)
			run(t, "objcopy", "--compress-debug-sections=zstd", bin, bin+".zst")
			return bin + ".zst"
		}},
		{"separate debug file", func(t *testing.T) string {
			needTool(t, "objcopy")
			bin := compile(t, "frames.c", "frames", debugFrameFlags...)
			run(t, "objcopy", "--only-keep-debug", bin, bin+".debug")
			return bin + ".debug"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file(t)
			tab := buildFile(t, file)
			kinds := checkAgainstReadelf(t, file, tab)
			t.Logf("%s: %d rows:%s", file, len(tab.Rows), kindsString(kinds))
		})
	}
}

// symbol returns the address of a function symbol of the ELF file at path.
func symbol(t testing.TB, path, name string) uint64 {
	t.Helper()
	f := openELF(t, path)
	syms, _ := f.Symbols()
	dyn, _ := f.DynamicSymbols()
	for _, s := range append(syms, dyn...) {
		if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			return s.Value
		}
	}
	t.Fatalf("%s: no function %s", path, name)
	return 0
}

func sectionAddr(t testing.TB, path, name string) uint64 {
	t.Helper()
	s := openELF(t, path).Section(name)
	if s == nil {
		t.Fatalf("%s: no section %s", path, name)
	}
	return s.Addr
}

func lookup(t testing.TB, tab *Table, pc uint64) Row {
	t.Helper()
	r, ok := tab.Lookup(pc)
	if !ok {
		t.Fatalf("no row for %#x", pc)
	}
	return r
}

// TestPLT checks the PLT rule on gcc-built executables: GNU ld's lazy PLT
// pushes the relocation index at entry offset 11, its IBT PLT (endbr64
// first) at offset 9.
func TestPLT(t *testing.T) {
	for _, tt := range []struct {
		name      string
		flags     []string
		threshold int32
	}{
		{"lazy", nil, 11},
		{"ibt", []string{"-fcf-protection=full", "-Wl,-z,ibtplt"}, 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := compile(t, "frames.c", "frames", append([]string{"-O2", "-fomit-frame-pointer"}, tt.flags...)...)
			tab := buildFile(t, bin)
			plt := sectionAddr(t, bin, ".plt")
			// PLT0 pushes the GOT's second entry, then jumps.
			if got, want := lookup(t, tab, plt), (Row{PC: plt, Kind: KindRSP, CFAOffset: 16}); got != want {
				t.Errorf("PLT0: %v, want %v", got, want)
			}
			entry := lookup(t, tab, plt+16)
			if want := (Row{PC: plt + 16, Kind: KindPLT, CFAOffset: tt.threshold}); entry != want {
				t.Errorf("PLT entries: %v, want %v", entry, want)
			}
		})
	}
}

// TestSpecialFrames checks the rows a stack walker stops or turns at.
func TestSpecialFrames(t *testing.T) {
	t.Run("libc", func(t *testing.T) {
		needFile(t, libc)
		tab := buildFile(t, libc)
		text := openELF(t, libc).Section(".text")
		code, err := text.Data()
		if err != nil {
			t.Fatal(err)
		}
		at := func(pc uint64, n int) []byte {
			off := pc - text.Addr
			return code[off : off+uint64(n)]
		}
		var signal, end []Row
		for _, r := range tab.Rows {
			switch r.Kind {
			case KindSignal:
				signal = append(signal, r)
			case KindEnd:
				end = append(end, r)
			}
		}
		// __restore_rt: its FDE starts one byte early (at the nop before
		// it), so that a lookup of "return address - 1" finds it.
		sigreturn := []byte{0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05} // mov $15,%rax; syscall
		if len(signal) != 1 || !bytes.Equal(at(signal[0].PC+1, len(sigreturn)), sigreturn) {
			t.Errorf("signal rows %v: want one, before mov $15,%%rax; syscall", signal)
		}
		if next := lookup(t, tab, signal[0].PC+1+uint64(len(sigreturn))); next.Kind != KindUndefined {
			t.Errorf("after __restore_rt: %v, want undefined", next)
		}
		// clone and clone3: the child's code starts by clearing rbp, the
		// outermost frame of the new thread.
		if len(end) != 2 {
			t.Fatalf("end rows %v, want clone's and clone3's child", end)
		}
		for _, r := range end {
			if b := at(r.PC, 2); !bytes.Equal(b, []byte{0x31, 0xed}) { // xor %ebp,%ebp
				t.Errorf("end row %v does not start with xor %%ebp,%%ebp: % x", r, b)
			}
		}
	})
	t.Run("fixture", func(t *testing.T) {
		bin := compile(t, "frames.c", "frames", "-O2", "-fomit-frame-pointer")
		tab := buildFile(t, bin)
		start := symbol(t, bin, "_start")
		if got := lookup(t, tab, start); got != (Row{PC: start, Kind: KindEnd}) {
			t.Errorf("_start: %v, want end", got)
		}
		// realign's DRAP sequence: lea 8(%rsp),%r10 (CFA in r10: not
		// representable), and $-64,%rsp; push -8(%r10); push %rbp;
		// mov %rsp,%rbp; push %r12; push %r10: from here CFA = *(rbp-16).
		var deref []Row
		fn := symbol(t, bin, "realign")
		for _, r := range tab.Rows {
			if r.Kind == KindDerefRBP {
				deref = append(deref, r)
			}
		}
		if len(deref) != 1 || deref[0].CFAOffset != -16 || deref[0].PC <= fn || deref[0].PC > fn+32 {
			t.Errorf("deref-rbp rows %v, want one with offset -16 near realign at %#x", deref, fn)
		}
		if got := lookup(t, tab, fn); got != (Row{PC: fn, Kind: KindRSP, CFAOffset: 8}) {
			t.Errorf("realign entry: %v", got)
		}
		if got := lookup(t, tab, fn+5); got.Kind != KindUndefined {
			t.Errorf("realign with CFA in r10: %v, want undefined", got)
		}
		// huge's 70000-byte frame does not fit the 16-bit CFA offset.
		fn = symbol(t, bin, "huge")
		var kinds []Kind
		for pc := fn; ; pc++ {
			r := lookup(t, tab, pc)
			if pc > fn && r.PC == pc && r.Kind == KindUndefined && len(kinds) > 0 && kinds[len(kinds)-1] == KindUndefined {
				break
			}
			if r.PC == pc {
				kinds = append(kinds, r.Kind)
			}
			if pc > fn+200 {
				break
			}
		}
		if len(kinds) < 2 || kinds[0] != KindRSP || kinds[1] != KindUndefined {
			t.Errorf("huge: kinds %v, want rsp then undefined", kinds)
		}
	})
}
