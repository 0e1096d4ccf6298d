package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestVAddrOf(t *testing.T) {
	// Shaped like a PIE with a text segment whose file offset and address
	// differ, and a data segment at an offset not page-aligned.
	segs := []segment{
		{off: 0x0, filesz: 0x628, vaddr: 0x0},
		{off: 0x1000, filesz: 0x1d5, vaddr: 0x1000},
		{off: 0x2db8, filesz: 0x258, vaddr: 0x3db8},
		{off: 0x5000, filesz: 0x100, vaddr: 0x400000},
	}
	tests := []struct {
		off, want uint64
		ok        bool
	}{
		{0x0, 0x0, true},
		{0x627, 0x627, true},
		{0x1000, 0x1000, true},
		{0x11d4, 0x11d4, true},
		{0x2db8, 0x3db8, true},
		{0x2dff, 0x3dff, true},
		{0x2000, 0x3000, true}, // page-rounded head of the data segment
		{0x5010, 0x400010, true},
		{0x4fff, 0x3fffff, true}, // just before a segment, within its page
		{0x3100, 0, false},       // past the data segment's end
		{0x9000, 0, false},
	}
	for _, tc := range tests {
		got, ok := vaddrOf(segs, tc.off)
		if got != tc.want || ok != tc.ok {
			t.Errorf("vaddrOf(%#x) = %#x, %v; want %#x, %v", tc.off, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := vaddrOf(nil, 0); ok {
		t.Error("vaddrOf(nil) found a segment")
	}
}

func TestSymbolTable(t *testing.T) {
	sym := func(name string, addr, size uint64, bind elf.SymBind) rankedSymbol {
		return rankedSymbol{symbol: symbol{addr: addr, size: size, name: name}, binding: bind}
	}
	tab := newSymbolTable([]rankedSymbol{
		sym("__libc_malloc", 0x1000, 0x100, elf.STB_GLOBAL),
		sym("malloc", 0x1000, 0x100, elf.STB_GLOBAL),
		sym("__libc_calloc", 0x1200, 0x80, elf.STB_GLOBAL),
		sym("calloc", 0x1200, 0x80, elf.STB_WEAK),
		sym("_start", 0x2000, 0, elf.STB_GLOBAL), // no size: runs to the next
		sym("_ZN3foo3barEv", 0x3000, 0x10, elf.STB_LOCAL),
		sym("_ZN3foo3barEv", 0x3000, 0x10, elf.STB_LOCAL), // in both tables
		sym("_RNvCs1234_7mycrate3foo", 0x3100, 0x10, elf.STB_LOCAL),
		// Ranked alike: the smaller name, wherever it comes; the largest size.
		sym("beta", 0x4000, 0x10, elf.STB_GLOBAL),
		sym("alfa", 0x4000, 0x20, elf.STB_GLOBAL),
		sym("gamma", 0x4000, 0x10, elf.STB_GLOBAL),
		// A worse rank loses to a larger name: "zulu" has a size.
		sym("aaaa", 0x5000, 0, elf.STB_GLOBAL),
		sym("zulu", 0x5000, 0x10, elf.STB_GLOBAL),
		sym("yank", 0x5000, 0x10, elf.STB_LOCAL),
	})
	tests := []struct {
		addr uint64
		want string
	}{
		{0xfff, ""},
		{0x1000, "malloc"},
		{0x10ff, "malloc"},
		{0x1100, ""}, // gap between sized symbols
		{0x1250, "calloc"},
		{0x2000, "_start"},
		{0x2fff, "_start"},
		{0x3008, "foo::bar()"},
		{0x3010, ""},
		{0x3105, "mycrate::foo"},
		{0x4018, "alfa"},
		{0x5008, "zulu"},
		{0xffff_ffff_ffff_ffff, ""},
	}
	for range 2 { // the second round reads the remembered demangled names
		for _, tc := range tests {
			if got := tab.lookup(tc.addr); got != tc.want {
				t.Errorf("lookup(%#x) = %q, want %q", tc.addr, got, tc.want)
			}
		}
	}
	if got := (*symbolTable)(nil).lookup(1); got != "" {
		t.Errorf("nil table lookup = %q", got)
	}
}

func TestLineTable(t *testing.T) {
	tab := &lineTable{files: []string{"/src/a.c", "/src/b.c"}, rows: []lineRow{
		{addr: 0x1000, file: 0, line: 10},
		{addr: 0x1008, file: 0, line: 11},
		{addr: 0x1008, file: 0, line: 12}, // same address: the later row wins
		{addr: 0x1010, file: -1},          // end of sequence
		{addr: 0x2000, file: -1},          // ends where the next starts
		{addr: 0x1800, file: 1, line: 5},
		{addr: 0x2000, file: 1, line: 7},
		{addr: 0x2010, file: -1},
	}}
	tab.sort()
	tests := []struct {
		addr uint64
		file string
		line int
	}{
		{0xfff, "", 0},
		{0x1000, "/src/a.c", 10},
		{0x1007, "/src/a.c", 10},
		{0x1008, "/src/a.c", 12},
		{0x100f, "/src/a.c", 12},
		{0x1010, "", 0},
		{0x1800, "/src/b.c", 5},
		{0x2000, "/src/b.c", 7},
		{0x2010, "", 0},
	}
	for _, tc := range tests {
		file, line := tab.lookup(tc.addr)
		if file != tc.file || line != tc.line {
			t.Errorf("lookup(%#x) = %s:%d, want %s:%d", tc.addr, file, line, tc.file, tc.line)
		}
	}
}

func TestFindBuildID(t *testing.T) {
	note := func(name string, typ uint32, desc []byte) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, [3]uint32{uint32(len(name)), uint32(len(desc)), typ})
		b.WriteString(name)
		b.Write(make([]byte, align4(uint64(len(name)))-uint64(len(name))))
		b.Write(desc)
		b.Write(make([]byte, align4(uint64(len(desc)))-uint64(len(desc))))
		return b.Bytes()
	}
	id := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"gnu build-id", note("GNU\x00", 3, id), "deadbeef01"},
		{"after another note", append(note("GNU\x00", 1, []byte{0, 0, 0, 0, 3, 0, 0, 0}), note("GNU\x00", 3, id)...), "deadbeef01"},
		{"other owner", note("Go\x00\x00", 3, id), ""},
		{"truncated", note("GNU\x00", 3, id)[:20], ""},
		{"huge sizes", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0}, ""},
		{"empty", nil, ""},
	}
	for _, tc := range tests {
		if got := findBuildID(binary.LittleEndian, tc.in); got != tc.want {
			t.Errorf("%s: findBuildID = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNewModuleRejectsNonELF(t *testing.T) {
	for _, in := range []string{"", "hello", "\x7fELF", "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 57)} {
		if m, err := NewModule(strings.NewReader(in)); err == nil {
			t.Errorf("NewModule(%q) = %v, want error", in, m)
		}
	}
}

// A module built with a known build-id reports it; functions and lines
// resolve by ELF address.
func TestModuleFromFixture(t *testing.T) {
	needTool(t, "gcc")
	dir := tempDir(t)
	bin := buildFixture(t, dir, "leak", "-O0", "-g", "-Wl,--build-id=0x0123456789abcdef")
	m, err := OpenModule(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := m.BuildID(), "0123456789abcdef"; got != want {
		t.Errorf("BuildID = %q, want %q", got, want)
	}
	if err := m.Load(); err != nil {
		t.Errorf("Load: %v", err)
	}
	addr, size := elfSymbol(t, bin, "leak_a")
	for _, a := range []uint64{addr, addr + size - 1} {
		if got := m.Function(a); got != "leak_a" {
			t.Errorf("Function(%#x) = %q, want leak_a", a, got)
		}
		file, line := m.Line(a)
		if filepath.Base(file) != "leak.c" || line == 0 {
			t.Errorf("Line(%#x) = %s:%d, want a line of leak.c", a, file, line)
		}
	}
}

// Modules are shared by file identity and, across copies, by build-id.
func TestModuleCache(t *testing.T) {
	needTool(t, "gcc")
	dir := tempDir(t)
	withID := buildFixture(t, dir, "with-id", "-O0", "-Wl,--build-id=sha1")
	withoutID := buildFixture(t, dir, "without-id", "-O0", "-Wl,--build-id=none")
	copyFile := func(from, to string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		to = filepath.Join(dir, to)
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return to
	}
	withIDCopy := copyFile(withID, "with-id-copy")
	withoutIDCopy := copyFile(withoutID, "without-id-copy")
	notELF := filepath.Join(dir, "not-elf")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	c := newModuleCache()
	defer c.close()
	get := func(path string) *Module {
		t.Helper()
		m, err := c.module(path, 0, origin{})
		if err != nil {
			t.Fatalf("module(%s): %v", path, err)
		}
		return m
	}
	if get(withID) != get(withID) { //nolint:staticcheck // SA4000: two opens, which must give one module
		t.Error("same file opened twice")
	}
	if get(withID) != get(withIDCopy) {
		t.Error("copy with the same build-id not shared")
	}
	if get(withoutID) == get(withoutIDCopy) {
		t.Error("copies without build-id shared")
	}
	if _, err := c.module(notELF, 0, origin{}); err == nil {
		t.Error("module(not ELF) succeeded")
	}
	fi, err := os.Stat(withID)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := keyOf(fi)
	if _, err := c.module(withID, key.ino+1, origin{}); err == nil {
		t.Error("module with the wrong inode succeeded")
	}
}

func TestDemangleName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"malloc", "malloc"},
		{"_start", "_start"},
		{"_ZN8memtrace6leak_cEv", "memtrace::leak_c()"},
		{"_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int const&)"},
		{"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
		{"_Zbroken", "_Zbroken"},
		{"_R", "_R"},
	}
	for _, tc := range tests {
		if got := demangleName(tc.in); got != tc.want {
			t.Errorf("demangleName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The line table of a real binary: rows are sorted and end markers keep
// addresses past a function from borrowing its last line.
func TestDWARFLineTableFixture(t *testing.T) {
	needTool(t, "gcc")
	dir := tempDir(t)
	for _, dwarfVersion := range []string{"-gdwarf-4", "-gdwarf-5"} {
		bin := buildFixture(t, dir, "leak"+dwarfVersion, "-O2", dwarfVersion)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tab, err := dwarfLineTable(f)
		if err != nil {
			t.Fatalf("%s: %v", dwarfVersion, err)
		}
		if tab == nil || len(tab.rows) == 0 {
			t.Fatalf("%s: no rows", dwarfVersion)
		}
		for i := 1; i < len(tab.rows); i++ {
			if tab.rows[i].addr < tab.rows[i-1].addr {
				t.Fatalf("%s: rows not sorted at %d", dwarfVersion, i)
			}
		}
		if last := tab.rows[len(tab.rows)-1]; last.file >= 0 {
			t.Errorf("%s: last row %+v is no end of sequence", dwarfVersion, last)
		}
	}
}

func TestCheckLineHeader(t *testing.T) {
	// A DWARF 5 header: version, address size, selector size, header
	// length, five fields, opcode base 1 (no lengths), then the directory
	// format (one path as a string), the count, the entries, and likewise
	// for files.
	header := func(dirCount byte, dirs string, fileCount byte, files string) []byte {
		body := []byte{5, 0, 8, 0, 0, 0, 0, 0, 1, 1, 1, 0xfb, 14, 1}
		body = append(body, 1, 1, 0x08, dirCount)
		body = append(body, dirs...)
		body = append(body, 1, 1, 0x08, fileCount)
		body = append(body, files...)
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	huge := func(b []byte, at int) []byte { // replace a count by 2^40 (uleb)
		out := append([]byte{}, b[:at]...)
		out = append(out, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20)
		out = append(out, b[at+1:]...)
		binary.LittleEndian.PutUint32(out, uint32(len(out)-4))
		return out
	}
	good := header(1, "/src\x00", 2, "a.c\x00b.c\x00")
	tests := []struct {
		name string
		in   []byte
		off  int64
		ok   bool
	}{
		{"dwarf 5", good, 0, true},
		{"dwarf 4", append(binary.LittleEndian.AppendUint32(nil, 2), 4, 0), 0, true},
		{"huge directory count", huge(good, 4+17), 0, false},
		{"huge file count", huge(good, 4+17+1+5+3), 0, false},
		{"truncated", good[:20], 0, false},
		{"length past section", good[:len(good)-1], 0, false},
		{"offset past section", good, int64(len(good) + 1), false},
		{"reserved length", []byte{0xf0, 0xff, 0xff, 0xff, 5, 0}, 0, false},
	}
	for _, tc := range tests {
		err := checkLineHeader(tc.in, tc.off, binary.LittleEndian)
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkLineHeader = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestSiteAtConcurrent: call sites named on two goroutines at once (the
// session names a report's first sites beside its loop) get the names one
// goroutine gives. Under -race, with libc's debug file (libc6-dbg: many
// DWARF 5 units), debug/dwarf's readers made on both goroutines raced in
// its cache of a unit's base offsets.
func TestSiteAtConcurrent(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	lm, err := OpenModule(libc)
	if err != nil {
		t.Skipf("no libc: %v", err)
	}
	id := lm.BuildID()
	lm.Close()
	debug := "/usr/lib/debug/.build-id/" + id[:2] + "/" + id[2:] + ".debug"
	if _, err := os.Stat(debug); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("libc's debug file: %v (.ci/run installs libc6-dbg)", err)
		}
		t.Skipf("libc's debug file: %v", err)
	}
	var rets []uint64
	for _, name := range []string{"malloc", "fopen", "qsort", "strtod", "getaddrinfo", "vfprintf", "regcomp", "setlocale"} {
		addr, size := elfSymbol(t, libc, name)
		for a := addr + 1; a < addr+size; a += max(1, size/16) {
			rets = append(rets, a)
		}
	}
	seq, err := OpenModule(debug)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	want := make([]site, len(rets))
	for i, r := range rets {
		want[i] = *seq.siteAt(r)
	}
	m, err := OpenModule(debug)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := make([][]site, 2)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rets {
				// One goroutine from each end: they meet in the middle.
				r := rets[i]
				if g == 1 {
					r = rets[len(rets)-1-i]
				}
				got[g] = append(got[g], *m.siteAt(r))
			}
		}()
	}
	wg.Wait()
	for i := range rets {
		if !reflect.DeepEqual(got[0][i], want[i]) || !reflect.DeepEqual(got[1][len(rets)-1-i], want[i]) {
			t.Fatalf("site at %#x: %+v and %+v, want %+v", rets[i], got[0][i], got[1][len(rets)-1-i], want[i])
		}
	}
}
