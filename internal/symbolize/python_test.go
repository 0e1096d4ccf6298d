package symbolize

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"testing"
)

// TestPythonLineTables decodes the line tables CPython wrote for one
// function (testdata: sample() of a script run on each version, with its
// lines as co_lines and co_positions give them, 0 for none), one
// instruction at a time.
func TestPythonLineTables(t *testing.T) {
	tests := []struct {
		version string
		minor   int
		first   int
		table   string
		lines   []int
	}{
		{"3.10", 10, 2, "04010c010c010e010a0212010802", []int{3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 11, 11, 11}},
		{"3.11", 11, 2, "8000d80c0d8045dd0d12903189588c58f000040517f0000405178801d80b0c8871893590418a3a883ad80c11905198119155894e88458845e00c119051894a88458845f002010c16f000010c169575985191789478f000010c16f100010c16f400010c168044e00b109024883bd00416", []int{2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 11, 11, 11}},
		{"3.12", 12, 2, "8000d80c0d8045dc0d1290318b58f2000405178801d80b0c8871893590418a3ad80c11905198119155894e8945e00c119051894a8945f009040517f40a00181d98519378f600010c169021d80f1090318a75f203000d0ef000010c168044f000010c16e00b109024883bd00416f9f205010c16", []int{2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 8, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 9, 9, 9, 9, 9, 9, 11, 11, 11, 11, 0, 0, 9, 9, 9}},
		{"3.13", 13, 2, "8000d80c0d8045dc0d1290318e588801d80b0c8871893590418b3ad80c1198119155894e8a45e00c119051894a8a45f109000e16f40a00181d98519478f300010c1691789021d80f1090318975f703000d0e91788044f000010c16e00b10883bd00416f9f205010c16", []int{2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 8, 8, 4, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 11, 11, 0, 0, 9, 9, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			tab, err := hex.DecodeString(tt.table)
			if err != nil {
				t.Fatal(err)
			}
			c := &pyCode{firstLine: tt.first, table: tab}
			for i, want := range tt.lines {
				if got := c.line(tt.minor, uint32(i)); got != want {
					t.Errorf("instruction %d: line %d, want %d", i, got, want)
				}
			}
		})
	}
}

// fakePyMem is a process's memory as a sparse file, holding 3.11 code
// objects: pyProc reads it as it reads /proc/PID/mem.
type fakePyMem struct {
	t *testing.T
	f *os.File
}

var layout311 = PythonLayout{Minor: 11, FirstLine: 72, Filename: 112, Name: 120, Qualname: 128,
	Linetable: 136, Adaptive: 184, ASCIIData: 40, CompactData: 56, Tagged: true, CodeType: fakeCodeType}

// fakeCodeType stands for PyCode_Type's address in fakePyMem.
const fakeCodeType = 0x4242000

func (m fakePyMem) u64(addr, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	if _, err := m.f.WriteAt(b[:], int64(addr)); err != nil {
		m.t.Fatal(err)
	}
}

// str writes a compact ASCII str object.
func (m fakePyMem) str(addr uint64, s string) {
	m.u64(addr+16, uint64(len(s)))
	m.u64(addr+32, 1<<2|1<<5|1<<6) // kind 1, compact, ascii
	if _, err := m.f.WriteAt([]byte(s), int64(addr+40)); err != nil {
		m.t.Fatal(err)
	}
}

// newFakePyProc returns a 3.11 process whose memory is m.
func newFakePyProc(t *testing.T) (fakePyMem, *pyProc) {
	f, err := os.CreateTemp(t.TempDir(), "mem")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return fakePyMem{t, f}, &pyProc{layout: layout311, mem: f, codes: map[uint64]*pyCode{},
		checked: map[uint64]uint64{}, replaced: map[pyReplaced]*pyCode{}}
}

// codeName is the function of the code object p's event at addr, tagged
// tag, ran; PythonFreed for none.
func codeName(t *testing.T, p *pyProc, addr uint64, tag uint16, batch uint64) string {
	t.Helper()
	c, err := p.code(addr, tag, batch)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		return PythonFreed
	}
	return c.function
}

// code writes a code object at addr named name (its strings at strs),
// of 10 code units, first line 7, with an empty line table.
func (m fakePyMem) code(addr, strs uint64, name string) (tag uint16) {
	file, fn, table := strs, strs+0x100, strs+0x200
	m.str(file, "app.py")
	m.str(fn, name)
	m.u64(table+16, 0)
	m.u64(addr, 1) // ob_refcnt
	m.u64(addr+8, fakeCodeType)
	m.u64(addr+16, 10)
	m.u64(addr+72, 7)
	for off, v := range map[uint64]uint64{112: file, 120: fn, 128: fn, 136: table} {
		m.u64(addr+off, v)
	}
	return PythonTag(file, fn)
}

// TestPythonReplacedCode: a code object freed and replaced at its address
// before or after memtrace read it. Each event carries the tag the
// probes read; its frame is named after the object it ran, or
// PythonFreed when that object was never read.
func TestPythonReplacedCode(t *testing.T) {
	m, p := newFakePyProc(t)
	const addr = 0x10000
	first := m.code(addr, 0x20000, "first")
	steps := []struct {
		what  string
		write string // a code object written at addr before the event; "" none
		strs  uint64
		tag   *uint16 // the event's; nil: the one just written
		batch uint64
		want  string // "": PythonFreed
	}{
		{what: "read once", tag: &first, batch: 1, want: "first"},
		{what: "met again in its batch", tag: &first, batch: 1, want: "first"},
		{what: "replaced, the new one's event", write: "second", strs: 0x30000, batch: 2, want: "second"},
		{what: "an event of the first, drained late", tag: &first, batch: 2, want: "first"},
		{what: "replaced twice before a read", write: "third", strs: 0x40000, batch: 3, want: "third"},
	}
	var lastTag uint16
	for _, s := range steps {
		tag := lastTag
		if s.write != "" {
			tag = m.code(addr, s.strs, s.write)
			lastTag = tag
		}
		if s.tag != nil {
			tag = *s.tag
		}
		c, err := p.code(addr, tag, s.batch)
		if err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		got := ""
		if c != nil {
			got = c.function
		}
		if got != s.want {
			t.Errorf("%s: named %q, want %q", s.what, got, s.want)
		}
	}
	// "fourth" ran and was replaced by "fifth" before anything was read.
	fourth := PythonTag(0x50000, 0x50100)
	m.code(addr, 0x60000, "fifth")
	if c, err := p.code(addr, fourth, 4); err != nil || c != nil {
		t.Errorf("a code object never read: %v, %v; want nil (PythonFreed)", c, err)
	}
	// Freed before it was read, and its memory now holds no code object
	// at all: its "names" point at no str, whether or not they are the
	// event's (freed memory keeps its old words). Still PythonFreed. Only
	// memory that cannot be read (the process gone) is an error: the
	// frame stays unnamed, and is counted.
	const other = 0x70000
	m.u64(other+112, 0x80000)
	m.u64(other+120, 0x80100)
	m.u64(other+128, 0x80100)
	for _, tag := range []uint16{fourth, PythonTag(0x80000, 0x80100)} {
		if c, err := p.code(other, tag, 5); err != nil || c != nil {
			t.Errorf("a code object replaced by other data (tag %#x): %v, %v; want nil (PythonFreed)", tag, c, err)
		}
	}
	// Freed before it was read, its memory otherwise as it was: names,
	// strings and tag all still match, but the header says it is dead
	// (the module code objects freed after import, whose strings had
	// been reused by others: "COM³" named a function of urllib/parse.py).
	for i, h := range []struct {
		what      string
		refs, typ uint64
	}{
		{"pymalloc's next free block over its count", 0x7f0000123450, fakeCodeType},
		{"the last free block: a count of 0", 0, fakeCodeType},
		{"malloc's pointers over both words", 0x55aa00, 0x7f0000999990},
	} {
		at := uint64(0x90000 + i*0x1000)
		tag := m.code(at, at+0x400, "dead")
		m.u64(at, h.refs)
		m.u64(at+8, h.typ)
		if c, err := p.code(at, tag, uint64(6+i)); err != nil || c != nil {
			t.Errorf("%s: %v, %v; want nil (PythonFreed)", h.what, c, err)
		}
		// Found dead, it is not read again in its batch; in the next
		// one it is (here, a code object again: named).
		m.u64(at, 1)
		m.u64(at+8, fakeCodeType)
		if c, err := p.code(at, tag, uint64(6+i)); err != nil || c != nil {
			t.Errorf("%s, again in its batch: %v, %v; want nil (not read again)", h.what, c, err)
		}
		if c, err := p.code(at, tag, uint64(16+i)); err != nil || c == nil || c.function != "dead" {
			t.Errorf("%s, alive in the next batch: %v, %v; want it named", h.what, c, err)
		}
	}
	if c, err := p.code(1<<40, fourth, 5); err == nil {
		t.Errorf("a code object in memory that cannot be read: %v; want an error", c)
	}
}

// TestPythonCodeFreed: the next code object at a freed one's address
// often has its names' strings where the last one's were, and so its tag.
// Only the probes' word of the free (PythonCodeFreed) tells them apart:
// the one after it is read afresh, and an event of it that finds no code
// object left is PythonFreed, never named after the first.
func TestPythonCodeFreed(t *testing.T) {
	m, p := newFakePyProc(t)
	r := &Resolver{}
	r.py.procs = map[int]*pyProc{7: p}
	const addr, strs = 0x10000, 0x20000
	name := func(tag uint16, batch uint64) string { return codeName(t, p, addr, tag, batch) }
	tag := m.code(addr, strs, "f7")
	if got := name(tag, 1); got != "f7" {
		t.Fatalf("first read: %q, want f7", got)
	}
	// f9 at the same address, its strings where f7's were: the same tag.
	if again := m.code(addr, strs, "f9"); again != tag {
		t.Fatalf("tags %#x and %#x: want the same", again, tag)
	}
	if got := name(tag, 1); got != "f7" {
		t.Fatalf("without the free: %q, the case is not made", got)
	}
	r.PythonCodeFreed(7, addr)
	if got := name(tag, 1); got != "f9" {
		t.Errorf("after the free: %q, want f9", got)
	}
	// f9 freed too, and its memory holds no code object: its late event
	// is PythonFreed, in its batch and the next.
	r.PythonCodeFreed(7, addr)
	m.u64(addr+8, 0x55aa00)
	for _, batch := range []uint64{1, 2} {
		if got := name(tag, batch); got != PythonFreed {
			t.Errorf("batch %d, after the second free: %q, want %q", batch, got, PythonFreed)
		}
	}
	// A process not traced, or gone: nothing to forget.
	r.PythonCodeFreed(8, addr)
}

// TestPythonNameTagged: with name tags (PythonNameTag), code objects
// that take one another's address and names' strings still differ in
// their tags. An event of one read only after the next replaced it is
// PythonFreed, not named after the next; and the next's, met while the
// first is cached (its free not seen), reads it afresh.
func TestPythonNameTagged(t *testing.T) {
	m, p := newFakePyProc(t)
	p.layout.NameTagged = true
	const addr, strs = 0x10000, 0x20000
	write := func(name string) uint16 {
		m.code(addr, strs, name)
		b := make([]byte, PythonNameRead)
		if _, err := m.f.ReadAt(b, strs+0x100+16); err != nil {
			t.Fatal(err)
		}
		return PythonNameTag(strs, strs+0x100, b, layout311.ASCIIData, layout311.CompactData)
	}
	name := func(tag uint16, batch uint64) string { return codeName(t, p, addr, tag, batch) }
	f7 := write("f7")
	f9 := write("f9")
	if f7 == f9 {
		t.Fatalf("f7 and f9: both tagged %#x", f7)
	}
	steps := []struct {
		what  string
		write string
		tag   *uint16
		batch uint64
		want  string
	}{
		{what: "f7's event, read after f9 took its place", tag: &f7, batch: 1, want: PythonFreed},
		{what: "f9's", tag: &f9, batch: 1, want: "f9"},
		{what: "f11's, f9 cached and its free not seen", write: "f11", batch: 1, want: "f11"},
		{what: "f9's, drained late", tag: &f9, batch: 1, want: "f9"},
	}
	for _, s := range steps {
		tag := uint16(0)
		if s.write != "" {
			tag = write(s.write)
		}
		if s.tag != nil {
			tag = *s.tag
		}
		if got := name(tag, s.batch); got != s.want {
			t.Errorf("%s: named %q, want %q", s.what, got, s.want)
		}
	}
	// A reader behind the process meets many events of an object
	// replaced since: the live one is read once, not again for each
	// (the CI run whose reader fell behind for good, reading 168 000
	// code objects).
	live := p.codes[addr]
	for _, batch := range []uint64{2, 2, 3} {
		if got := name(f7, batch); got != PythonFreed {
			t.Errorf("f7's event in batch %d: named %q, want %q", batch, got, PythonFreed)
		}
		if p.codes[addr] != live {
			t.Errorf("f7's event in batch %d: f11's code object read again", batch)
		}
	}
}
