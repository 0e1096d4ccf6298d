package tracer

import (
	"debug/elf"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/unwind"
	"golang.org/x/sys/unix"
)

func TestStackStore(t *testing.T) {
	var s stackStore
	a := s.intern(7, []uint64{1, 2, 3}, true)
	b := s.intern(7, []uint64{1, 2, 3}, false) // same frames, not complete: another stack
	c := s.intern(7, []uint64{1, 2}, true)
	d := s.intern(8, []uint64{1, 2}, true) // another process's addresses: another stack
	if a == b || a == c || b == c || d == c {
		t.Fatalf("ids %d %d %d %d, want four different", a, b, c, d)
	}
	buf := []uint64{1, 2, 3}
	if got := s.intern(7, buf, true); got != a {
		t.Errorf("same stack again: id %d, want %d", got, a)
	}
	buf[0] = 9 // the store keeps its own copy
	if st := s.stacks[a]; st.frames[0] != 1 || !st.complete {
		t.Errorf("stored stack %+v changed with the caller's buffer", st)
	}
	if got := s.intern(7, nil, true); got != -1 {
		t.Errorf("empty stack: id %d, want -1", got)
	}
	// Forgetting a process drops its stacks only; ids are not reused.
	s.forget(7)
	if _, ok := s.stacks[a]; ok || len(s.stacks) != 1 || len(s.ids) != 1 {
		t.Errorf("after forget(7): %d stacks, %d keys, want pid 8's alone", len(s.stacks), len(s.ids))
	}
	if got := s.intern(7, []uint64{1, 2, 3}, true); got == a || got == b || got == c || got == d {
		t.Errorf("stack interned again after forget: id %d reused", got)
	}
}

// TestMarkFunctions: on a real executable, the wrapper's code is flagged
// wrapper, the named functions are not flagged, and no code is flagged
// unnamed while every function has a symbol.
func TestMarkFunctions(t *testing.T) {
	f, tab := stacksTable(t)
	syms, _ := f.Symbols()
	addr := map[string]elf.Symbol{}
	for _, s := range syms {
		addr[s.Name] = s
	}
	marked, named, _ := markFunctions(f, tab, func(name string) bool { return name == "inner" })
	if !marked || !named {
		t.Fatalf("marked %v, named %v, want true true", marked, named)
	}
	tests := []struct {
		fn   string
		want uint8
	}{{"inner", unwind.FlagWrapper}, {"outer", 0}, {"main", 0}}
	for _, tt := range tests {
		s, ok := addr[tt.fn]
		if !ok {
			t.Fatalf("no symbol %s", tt.fn)
		}
		for _, pc := range []uint64{s.Value, s.Value + s.Size - 1} {
			r, ok := tab.Lookup(pc)
			if !ok || r.Flags != tt.want {
				t.Errorf("%s at %#x: row %+v (found %v), want flags %#x", tt.fn, pc, r, ok, tt.want)
			}
		}
	}
}

// TestMarkStripped: a stripped executable (no function symbol left, as
// Debian ships programs) has all its code flagged unnamed and is known to
// have no names, so the probes stop looking for a named caller in it.
func TestMarkStripped(t *testing.T) {
	f, tab := stacksTable(t, "-s")
	marked, named, _ := markFunctions(f, tab, func(string) bool { return true })
	if !marked || named {
		t.Fatalf("marked %v, named %v, want true false", marked, named)
	}
	text := f.Section(".text")
	for _, r := range tab.Rows {
		if r.PC >= text.Addr && r.PC < text.Addr+text.Size && r.Flags != unwind.FlagAnon {
			t.Errorf("row %+v in .text: flags %#x, want %#x", r, r.Flags, unwind.FlagAnon)
		}
	}
}

// stacksTable builds ../testdata/stacks.c with gcc -O2 and flags, and
// returns the executable, closed with the test, and its unwind table.
func stacksTable(t *testing.T, flags ...string) (*elf.File, *unwind.Table) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stacks")
	args := append([]string{"-O2", "-o", bin, "../../testdata/stacks.c"}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v: %s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tab, err := unwind.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, tab
}

// TestSharedLibrary: the file flags that let unnamed code of a skipped
// call's file pass for that call's (FILE_LIBRARY, FILE_ALLOCATOR) go to
// shared libraries only: a PIE program, and a program that links an
// allocator in, have an interpreter as glibc's libc.so.6 does, and no
// soname.
func TestSharedLibrary(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		flags []string
		want  bool
	}{
		{"pie", []string{"-fPIE", "-pie"}, false},
		{"static", []string{"-static"}, false},
		{"shared", []string{"-shared", "-fPIC", "-Wl,-soname,libstacks.so.1"}, true},
		{"shared-no-soname", []string{"-shared", "-fPIC"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name)
			args := append([]string{"-O2", "-o", out, "../../testdata/stacks.c"}, tt.flags...)
			if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				t.Skipf("gcc: %v: %s", err, b)
			}
			f, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := sharedLibrary(f); got != tt.want {
				t.Errorf("sharedLibrary = %v, want %v", got, tt.want)
			}
		})
	}
}

// disjoint keeps the first of overlapping ranges, sorted.
func TestDisjoint(t *testing.T) {
	got := disjoint([][2]uint64{{0x30, 0x40}, {0x10, 0x20}, {0x10, 0x20}, {0x18, 0x28}, {0x20, 0x30}})
	want := [][2]uint64{{0x10, 0x20}, {0x20, 0x30}, {0x30, 0x40}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("disjoint = %#x, want %#x", got, want)
	}
}

// TestKeyOfPathContended: the key query holds while memtrace's own
// threads map and unmap: bpf_find_vma only tries the address space's lock,
// and a miss must be tried again, not taken as a file without a table.
func TestKeyOfPathContended(t *testing.T) {
	needBPF(t)
	o := DefaultOptions()
	o.RingBytes = 1 << 20
	objs, _ := loadDrainer(t, o)
	want, err := objs.tables.keyOfPath("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	defer busy(2, func() bool {
		// Unmapping 32 MiB of pages holds the lock for a while, as
		// unmapping a big file's table source does.
		m, err := unix.Mmap(-1, 0, 32<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err == nil {
			unix.Munmap(m)
		}
		return true
	})()
	for i := range 500 {
		got, err := objs.tables.keyOfPath("/bin/true")
		if err != nil || got != want {
			t.Fatalf("query %d: key %+v, %v; want %+v", i, got, err, want)
		}
	}
}

// TestPutRows: rows copied into the mapped rows map (tables.putRows,
// copyRows) are the values the walk looks up, at any first row, a page's
// edge crossed, and the rows around them are left as they were.
func TestPutRows(t *testing.T) {
	needBPF(t)
	o := DefaultOptions()
	o.RingBytes = 1 << 20
	objs, _ := loadDrainer(t, o)
	tab := objs.tables
	if tab.rows.Flags()&unix.BPF_F_MMAPABLE == 0 {
		t.Fatal("the rows map is not mmapable: rows are written element by element")
	}
	put := func(first uint32, vals []uint64) {
		t.Helper()
		b := make([]byte, 0, 8*len(vals))
		for _, v := range vals {
			b = binary.NativeEndian.AppendUint64(b, v)
		}
		if err := copyRows(tab.rows, first, b); err != nil {
			t.Fatal(err)
		}
	}
	// 1000 rows from row 509: from inside the first page into the third.
	const first, n = 509, 1000
	want := make([]uint64, n)
	for i := range want {
		want[i] = 0x1234_5678_0000_0000 | uint64(i)
	}
	put(first-1, []uint64{7})
	put(first+n, []uint64{9})
	put(first, want)
	for i := range uint32(n + 2) {
		key := first - 1 + i
		var got uint64
		if err := tab.rows.Lookup(key, &got); err != nil {
			t.Fatalf("row %d: %v", key, err)
		}
		exp := uint64(7)
		switch {
		case i == n+1:
			exp = 9
		case i > 0:
			exp = want[i-1]
		}
		if got != exp {
			t.Fatalf("row %d = %#x, want %#x", key, got, exp)
		}
	}
}
