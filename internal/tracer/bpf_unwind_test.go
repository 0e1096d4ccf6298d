package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/tracer/bpftest"
)

// The probes' stack walk (bpf/unwind.h) and refault slots (bpf/refault.h,
// bpf/resident.h) as code: test programs (bpf/test_unwind.bpf.c) run them
// through BPF_PROG_TEST_RUN on known inputs. The walk runs in this
// process: the stack is memory the test writes, the code a file it maps,
// whose unwind rows it writes itself.

// unwindTestObjects are the test programs and the maps the test fills.
type unwindTestObjects struct {
	Walk    *ebpf.Program `ebpf:"mt_test_walk"`
	Refault *ebpf.Program `ebpf:"mt_test_refault"`
	FileKey *ebpf.Program `ebpf:"mt_file_key"`
	Rows    *ebpf.Map     `ebpf:"unwind_rows"`
	Files   *ebpf.Map     `ebpf:"unwind_files"`
	Slots   *ebpf.Map     `ebpf:"refault_slots"`
	Frames  *ebpf.Map     `ebpf:"walk_frames"`
	PyWalk  *ebpf.Program `ebpf:"mt_test_py_walk"`
	Site    *ebpf.Program `ebpf:"mt_test_site"`
	Epoch   *ebpf.Map     `ebpf:"frame_epoch"`
}

// siteTest is struct site_test.
type siteTest struct {
	PC, SP, BP uint64
	Known      int32
	Walked     uint8
	_          [3]uint8
	ChargedPC  uint64
}

// pyWalkTest is struct py_walk_test.
type pyWalkTest struct {
	Frame                                uint64
	CodeOff, PrevOff, InstrOff, EntryOff uint32
	NamesOff                             uint32
	Gen                                  uint32
	N                                    uint32
	_                                    uint32 // C's padding before freed
	Freed                                uint64
	ASCIIOff, CompactOff                 uint32
}

// walkTest is struct walk_test (checked against the object's BTF).
type walkTest struct {
	PC, SP, BP   uint64
	Exact, Fault uint8
	End, Chain   uint8
	N, Charged   uint32
	NoTable      uint8
	Remembered   uint8
	Memo         uint8
	_            [1]uint8
	ChargedPC    uint64
	Told         int64
}

// refaultTest is struct refault_test.
type refaultTest struct {
	Addr, Size uint64
	TGID       uint32
	Charge     uint8
	_          [3]uint8
	Told       int64
}

const (
	testStackDepth = 8
	stepEnd        = 1 // STEP_END: the stack is complete
	stepStop       = 2 // STEP_STOP: truncated
)

func loadUnwindTest(t *testing.T) *unwindTestObjects {
	t.Helper()
	return loadUnwindTestDepth(t, testStackDepth)
}

// loadUnwindTestDepth loads the test programs with stack_depth frames kept.
func loadUnwindTestDepth(t *testing.T, stackDepth uint32) *unwindTestObjects {
	t.Helper()
	needBPF(t)
	spec, err := bpftest.LoadUnwind()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"walkTest": walkTest{}, "refaultTest": refaultTest{}, "pyWalkTest": pyWalkTest{},
		"siteTest": siteTest{}} {
		ctype := map[string]string{"walkTest": "walk_test", "refaultTest": "refault_test", "pyWalkTest": "py_walk_test",
			"siteTest": "site_test"}[name]
		var s *btf.Struct
		if err := spec.Types.TypeByName(ctype, &s); err != nil {
			t.Fatal(err)
		}
		if got := binary.Size(v); got != int(s.Size) {
			t.Fatalf("%s is %d bytes, struct %s %d", name, got, ctype, s.Size)
		}
	}
	if err := spec.Variables["stack_depth"].Set(stackDepth); err != nil {
		t.Fatal(err)
	}
	var objs unwindTestObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatalf("load test programs: %v", err)
	}
	t.Cleanup(func() {
		_MemtraceClose(objs.Walk, objs.Refault, objs.FileKey, objs.Rows, objs.Files, objs.Slots, objs.Frames, objs.PyWalk,
			objs.Site, objs.Epoch)
	})
	return &objs
}

// run runs a test program on ctx, which it reads back.
func runCtx[T any](t *testing.T, p *ebpf.Program, ctx *T) {
	t.Helper()
	var in bytes.Buffer
	if err := binary.Write(&in, binary.NativeEndian, ctx); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, in.Len())
	if _, err := p.Run(&ebpf.RunOptions{Context: in.Bytes(), ContextOut: out}); err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := binary.Read(bytes.NewReader(out), binary.NativeEndian, ctx); err != nil {
		t.Fatal(err)
	}
}

// mapTestFile maps a file of size bytes here, for its key and its address.
func mapTestFile(t *testing.T, objs *unwindTestObjects, size int) (base uint64, key memtraceFileKey) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "code")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	base = uint64(uintptr(unsafe.Pointer(&mem[0])))
	q := memtraceFileKeyQuery{Addr: base}
	runCtx(t, objs.FileKey, &q)
	if q.Found == 0 {
		t.Fatal("mt_file_key found no file at the mapping")
	}
	return base, q.Key
}

// stackMem is a page of anonymous memory the test writes a stack into.
type stackMem []byte

func newStack(t *testing.T) stackMem {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

func (s stackMem) base() uint64 { return uint64(uintptr(unsafe.Pointer(&s[0]))) }

// put writes v at offset off of the stack.
func (s stackMem) put(off, v uint64) { binary.NativeEndian.PutUint64(s[off:], v) }

// TestWalk walks synthetic stacks with known tables: three functions of a
// mapped file, A at [0x100, 0x200), B at [0x200, 0x300) and C, the
// outermost, from 0x300. A keeps its frame by rsp (rbp saved below its
// return address), B by rbp.
func TestWalk(t *testing.T) {
	objs := loadUnwindTest(t)
	code, key := mapTestFile(t, objs, 3*4096)
	a, b, c := code+0x150, code+0x250, code+0x350 // return addresses into each
	const first = 40                              // where the file's rows sit in unwind_rows
	rbpSaved := uint8(memtraceRowFlagROW_RBP_SAVED)
	rows := func(aFlags uint8) []memtraceUnwindRow {
		return []memtraceUnwindRow{
			{Pc: 0x100, Kind: uint8(memtraceUnwindKindUNWIND_RSP) | rbpSaved | aFlags, CfaOff: 16, RbpOff8: -2},
			{Pc: 0x200, Kind: uint8(memtraceUnwindKindUNWIND_RBP) | rbpSaved, CfaOff: 16, RbpOff8: -2},
			{Pc: 0x300, Kind: uint8(memtraceUnwindKindUNWIND_END)},
		}
	}
	// byRows is the stack the rows describe: A's frame at sp, B's above.
	byRows := func(s stackMem, cRet uint64) walkTest {
		sp := s.base()
		s.put(0x08, b)       // A's return address, at its CFA (sp + 16) - 8
		s.put(0x00, sp+0x40) // B's rbp, saved by A at CFA - 16
		s.put(0x48, cRet)    // B's return address, at its CFA (rbp + 16) - 8
		s.put(0x40, 0)       // C's rbp
		return walkTest{PC: a, SP: sp, BP: 0x1234}
	}
	// byFramePointers is a stack of rbp links only.
	byFramePointers := func(s stackMem, _ uint64) walkTest {
		sp := s.base()
		s.put(0x20, sp+0x60) // A's saved rbp: B's frame
		s.put(0x28, b)
		s.put(0x60, sp+0x90) // B's: C's frame
		s.put(0x68, c)
		s.put(0x90, 0) // C's: none (the walk stops there)
		s.put(0x98, 0)
		return walkTest{PC: a, SP: sp, BP: sp + 0x20}
	}
	tests := []struct {
		name      string
		rows      []memtraceUnwindRow
		fileFlags uint32
		noFile    bool
		stack     func(stackMem, uint64) walkTest
		cRet      uint64 // B's return address
		want      walkTest
		frames    []uint64
	}{
		{name: "complete", rows: rows(0), stack: byRows, cRet: c,
			want: walkTest{End: stepEnd, N: 3, Charged: 0, Remembered: 1, ChargedPC: a}, frames: []uint64{a, b, c}},
		{name: "wrapper charges its caller", rows: rows(uint8(memtraceRowFlagROW_WRAPPER)), stack: byRows, cRet: c,
			want: walkTest{End: stepEnd, N: 3, Charged: 1, Memo: 1, ChargedPC: b}, frames: []uint64{a, b, c}},
		{name: "return into no mapping", rows: rows(0), stack: byRows, cRet: 0x10,
			want: walkTest{End: stepStop, N: 3, Charged: 0, Remembered: 1, ChargedPC: a}, frames: []uint64{a, b, 0x10}},
		{name: "frame pointers without CFI", fileFlags: uint32(memtraceFileFlagFILE_NO_CFI), stack: byFramePointers,
			want: walkTest{End: stepStop, N: 3, Charged: 0, Remembered: 1, ChargedPC: a}, frames: []uint64{a, b, c}},
		// Until a file's table is in, its frame is charged as it is (no
		// wrapper skipped past it), and the event says so (EVENT_NO_TABLE);
		// a fault there is not remembered as charging itself, or it would
		// stay charged so once the table is in.
		{name: "no table: asked for", noFile: true, stack: byRows, cRet: c,
			want: walkTest{End: stepStop, N: 1, NoTable: 1, ChargedPC: a}, frames: []uint64{a}},
		{name: "table pending", fileFlags: uint32(memtraceFileFlagFILE_PENDING), stack: byRows, cRet: c,
			want: walkTest{End: stepStop, N: 1, NoTable: 1, ChargedPC: a}, frames: []uint64{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, r := range tt.rows {
				if err := objs.Rows.Put(uint32(first+i), r); err != nil {
					t.Fatal(err)
				}
			}
			if err := objs.Files.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				t.Fatal(err)
			}
			if !tt.noFile {
				f := memtraceUnwindFile{First: first, Count: uint32(len(tt.rows)), Flags: tt.fileFlags}
				if err := objs.Files.Put(key, f); err != nil {
					t.Fatal(err)
				}
			}
			w := tt.stack(newStack(t), tt.cRet)
			runCtx(t, objs.Walk, &w)
			var out bpftest.UnwindWalkFrames
			if err := objs.Frames.Lookup(uint32(0), &out); err != nil {
				t.Fatal(err)
			}
			kept := out.Frames
			got := walkTest{End: w.End, N: w.N, Chain: w.Chain, Charged: w.Charged, NoTable: w.NoTable,
				Remembered: w.Remembered, Memo: w.Memo, ChargedPC: w.ChargedPC}
			frames := kept[:min(int(w.N), len(kept))]
			if got != tt.want || !slices.Equal(frames, tt.frames) {
				t.Errorf("walk: %+v, frames %#x; want %+v, frames %#x", got, frames, tt.want, tt.frames)
			}
			// A file without a table is asked for once (KIND_UNWIND_MISS),
			// then is pending: no more asks.
			if asked := w.Told > 0; asked != tt.noFile {
				t.Errorf("wrote %d bytes into the ring, want a record: %v", w.Told, tt.noFile)
			}
			if tt.noFile {
				var f memtraceUnwindFile
				if err := objs.Files.Lookup(key, &f); err != nil || f.Flags != uint32(memtraceFileFlagFILE_PENDING) {
					t.Errorf("file after the ask: %+v (%v), want pending", f, err)
				}
			}
		})
	}
}

// TestWalkMemoNeedsTable: a wrapper's caller charged before its file's
// table is in is not memoized (report_site would charge the same caller
// from then on, though the table may show it is a wrapper too).
func TestWalkMemoNeedsTable(t *testing.T) {
	objs := loadUnwindTest(t)
	code, key := mapTestFile(t, objs, 3*4096)
	other, _ := mapTestFile(t, objs, 3*4096) // no table
	const first = 40
	wrapper := []memtraceUnwindRow{
		{Pc: 0x100, Kind: uint8(memtraceUnwindKindUNWIND_RSP) | uint8(memtraceRowFlagROW_RBP_SAVED) | uint8(memtraceRowFlagROW_WRAPPER),
			CfaOff: 16, RbpOff8: -2},
		{Pc: 0x200, Kind: uint8(memtraceUnwindKindUNWIND_END)},
	}
	for i, r := range wrapper {
		if err := objs.Rows.Put(uint32(first+i), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := objs.Files.Put(key, memtraceUnwindFile{First: first, Count: uint32(len(wrapper))}); err != nil {
		t.Fatal(err)
	}
	s := newStack(t)
	caller := other + 0x250
	s.put(0x08, caller) // the wrapper's return address, into the file without a table
	s.put(0x00, 0)
	w := walkTest{PC: code + 0x150, SP: s.base(), BP: 0x1234}
	runCtx(t, objs.Walk, &w)
	if w.Charged != 1 || w.ChargedPC != caller || w.NoTable != 1 || w.Memo != 0 {
		t.Errorf("walk: charged %d at %#x, no_table %d, memo %d; want 1 at %#x, 1, 0", w.Charged, w.ChargedPC, w.NoTable, w.Memo, caller)
	}
}

// TestSiteCache: without stacks, an allocation whose caller the frame
// cache knows is charged without a walk: a caller charged itself, and a
// wrapper's caller read through the wrapper's cached row, sp- or
// rbp-based; a wrapper whose caller is a wrapper too is walked again.
// The first allocation from each place walks and fills the cache.
func TestSiteCache(t *testing.T) {
	objs := loadUnwindTestDepth(t, 0)
	code, key := mapTestFile(t, objs, 3*4096)
	a, b, c := code+0x150, code+0x250, code+0x350 // return addresses into A, B and C
	const first = 40
	wrapper, rbpSaved := uint8(memtraceRowFlagROW_WRAPPER), uint8(memtraceRowFlagROW_RBP_SAVED)
	rsp, rbp := uint8(memtraceUnwindKindUNWIND_RSP), uint8(memtraceUnwindKindUNWIND_RBP)
	// A's frame at sp, B's by rbp above it; A's row decides how A's return address is found.
	stack := func(s stackMem, aByRBP bool) siteTest {
		sp := s.base()
		s.put(0x48, c) // B's return address, at its CFA (rbp + 16) - 8
		s.put(0x40, 0) // C's rbp
		if aByRBP {
			s.put(0x28, b)       // A's return address, at its CFA (rbp + 16) - 8
			s.put(0x20, sp+0x40) // B's rbp
			return siteTest{PC: a, SP: sp, BP: sp + 0x20}
		}
		s.put(0x08, b)       // A's return address, at its CFA (sp + 16) - 8
		s.put(0x00, sp+0x40) // B's rbp, saved by A at CFA - 16
		return siteTest{PC: a, SP: sp, BP: sp + 0x40}
	}
	type answer struct {
		Known   int32
		Walked  uint8
		Charged uint64
	}
	tests := []struct {
		name         string
		aRow, bRow   memtraceUnwindRow
		aByRBP       bool
		first, again answer
	}{
		{name: "caller charged itself",
			aRow: memtraceUnwindRow{Kind: rsp | rbpSaved, CfaOff: 16, RbpOff8: -2}, bRow: memtraceUnwindRow{Kind: rbp | rbpSaved, CfaOff: 16, RbpOff8: -2},
			first: answer{Known: 0, Walked: 1, Charged: a}, again: answer{Known: 1, Walked: 0, Charged: 0}},
		{name: "sp-based wrapper",
			aRow: memtraceUnwindRow{Kind: rsp | rbpSaved | wrapper, CfaOff: 16, RbpOff8: -2}, bRow: memtraceUnwindRow{Kind: rbp | rbpSaved, CfaOff: 16, RbpOff8: -2},
			first: answer{Known: 2, Walked: 1, Charged: b}, again: answer{Known: 2, Walked: 0, Charged: b}},
		{name: "rbp-based wrapper", aByRBP: true,
			aRow: memtraceUnwindRow{Kind: rbp | rbpSaved | wrapper, CfaOff: 16, RbpOff8: -2}, bRow: memtraceUnwindRow{Kind: rbp | rbpSaved, CfaOff: 16, RbpOff8: -2},
			first: answer{Known: 0, Walked: 1, Charged: b}, again: answer{Known: 0, Walked: 0, Charged: b}},
		{name: "wrapper called by a wrapper",
			aRow: memtraceUnwindRow{Kind: rsp | rbpSaved | wrapper, CfaOff: 16, RbpOff8: -2}, bRow: memtraceUnwindRow{Kind: rbp | rbpSaved | wrapper, CfaOff: 16, RbpOff8: -2},
			first: answer{Known: 0, Walked: 1, Charged: c}, again: answer{Known: 0, Walked: 1, Charged: c}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.aRow.Pc, tt.bRow.Pc = 0x100, 0x200
			rows := []memtraceUnwindRow{tt.aRow, tt.bRow, {Pc: 0x300, Kind: uint8(memtraceUnwindKindUNWIND_END)}}
			for j, r := range rows {
				if err := objs.Rows.Put(uint32(first+j), r); err != nil {
					t.Fatal(err)
				}
			}
			if err := objs.Files.Put(key, memtraceUnwindFile{First: first, Count: uint32(len(rows))}); err != nil {
				t.Fatal(err)
			}
			// A new epoch: nothing cached from the case before.
			if err := objs.Epoch.Put(uint32(0), uint64(100+i)); err != nil {
				t.Fatal(err)
			}
			s := newStack(t)
			for _, want := range []answer{tt.first, tt.again} {
				st := stack(s, tt.aByRBP)
				runCtx(t, objs.Site, &st)
				if got := (answer{st.Known, st.Walked, st.ChargedPC}); got != want {
					t.Errorf("emit_site: %+v, want %+v", got, want)
				}
			}
		})
	}
}

// TestRefaultSlots: a fault not sampled tells user space of its page when
// a sample was charged to the page's slot and not uncharged since; a huge
// page's always.
func TestRefaultSlots(t *testing.T) {
	objs := loadUnwindTest(t)
	const pid, page = 4242, 0x7f0000123000
	slot := refaultSlot(pid, page, 20)
	steps := []struct {
		name       string
		in         refaultTest
		uncharge   bool // user space uncharges the slot's sample first
		told       bool
		charged    uint32
		uncharged  uint32
		checkSlots bool
	}{
		{name: "clean slot", in: refaultTest{Addr: page, Size: 4096, TGID: pid}},
		{name: "charged", in: refaultTest{Addr: page, TGID: pid, Charge: 1}, charged: 1, checkSlots: true},
		{name: "refault of a charged page", in: refaultTest{Addr: page, Size: 4096, TGID: pid}, told: true},
		{name: "uncharged since", in: refaultTest{Addr: page, Size: 4096, TGID: pid}, uncharge: true,
			charged: 1, uncharged: 1, checkSlots: true},
		{name: "huge page", in: refaultTest{Addr: 0x7f0000400000, Size: 2 << 20, TGID: pid}, told: true},
	}
	for _, st := range steps {
		if st.uncharge {
			if err := objs.Slots.Put(slot, [2]uint32{1, 1}); err != nil {
				t.Fatal(err)
			}
		}
		in := st.in
		runCtx(t, objs.Refault, &in)
		if told := in.Told > 0; told != st.told {
			t.Errorf("%s: wrote %d bytes into the ring, want a record: %v", st.name, in.Told, st.told)
		}
		if st.checkSlots {
			var v [2]uint32
			if err := objs.Slots.Lookup(slot, &v); err != nil || v != [2]uint32{st.charged, st.uncharged} {
				t.Errorf("%s: slot %d holds %v (%v), want charged %d uncharged %d", st.name, slot, v, err, st.charged, st.uncharged)
			}
		}
	}
}

// TestPythonWalk walks a synthetic chain of three CPython 3.11 frames
// (python.h's py_step): each frame gives its code object, tagged with its
// co_filename and co_name pointers as symbolize.PythonTag folds them, and
// its instruction with its entry byte. A code object whose names cannot
// be read keeps tag 0; without names_off no tag is read. With a cache
// generation a code object's names are read once: its tag stays what it
// was until the code object is freed (the code_dealloc probe), and
// another generation reads its own.
func TestPythonWalk(t *testing.T) {
	objs := loadUnwindTest(t)
	mem := newStack(t)
	base := mem.base()
	const (
		codeOff, prevOff, instrOff, entryOff, namesOff = 32, 48, 56, 68, 112
		frameSize, codeAt                              = 0x100, 0x800
	)
	type frame struct {
		code       uint64 // offset in mem, or an unreadable address when unmapped
		unmapped   bool
		file, name uint64
		instr      uint64
		entry      uint8
	}
	frames := []frame{
		{code: codeAt, file: 0x7f0000001000, name: 0x7f0000002000, instr: 0x40, entry: 0},
		{code: codeAt + 0x100, file: 0x7f0000001000, name: 0x7f0000003000, instr: 0x88, entry: 1},
		{code: 0x10, unmapped: true, instr: 0x20},
	}
	for i, f := range frames {
		at := uint64(i * frameSize)
		code := f.code
		if !f.unmapped {
			code = base + f.code
			mem.put(f.code+namesOff, f.file)
			mem.put(f.code+namesOff+8, f.name)
		}
		mem.put(at+codeOff, code)
		mem.put(at+instrOff, code+184+f.instr)
		mem[at+entryOff] = f.entry
		if i+1 < len(frames) {
			mem.put(at+prevOff, base+uint64(i+1)*frameSize)
		}
	}
	tag := func(name uint64) uint64 { return uint64(symbolize.PythonTag(frames[0].file, name)) << 48 }
	// Each walk in turn, frame 0's co_name set to rename first (0: as it
	// is); wantTag is frame 0's tag (0: none).
	walks := []struct {
		what    string
		rename  uint64
		tagged  bool
		gen     uint32
		freed   bool
		wantTag uint64
	}{
		{what: "read, then cached", tagged: true, gen: 7, wantTag: tag(frames[0].name)},
		{what: "cached: not read again", rename: 0x7f0000004000, tagged: true, gen: 7, wantTag: tag(frames[0].name)},
		{what: "freed: read again", tagged: true, gen: 7, freed: true, wantTag: tag(0x7f0000004000)},
		{what: "another generation reads its own", rename: 0x7f0000005000, tagged: true, gen: 8, wantTag: tag(0x7f0000005000)},
		{what: "the first generation's stays", tagged: true, gen: 7, wantTag: tag(0x7f0000004000)},
		{what: "no generation: read every time", rename: 0x7f0000006000, tagged: true, wantTag: tag(0x7f0000006000)},
		{what: "untagged", tagged: false},
	}
	for _, w := range walks {
		if w.rename != 0 {
			mem.put(frames[0].code+namesOff+8, w.rename)
		}
		in := pyWalkTest{Frame: base, CodeOff: codeOff, PrevOff: prevOff, InstrOff: instrOff, EntryOff: entryOff, Gen: w.gen}
		if w.tagged {
			in.NamesOff = namesOff
		}
		if w.freed {
			in.Freed = base + frames[0].code
		}
		runCtx(t, objs.PyWalk, &in)
		if in.N != uint32(len(frames)) {
			t.Fatalf("%s: %d frames, want %d", w.what, in.N, len(frames))
		}
		var got bpftest.UnwindWalkFrames
		if err := objs.Frames.Lookup(uint32(0), &got); err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			code := f.code
			if !f.unmapped {
				code = base + f.code
			}
			want := code
			switch {
			case i == 0:
				want |= w.wantTag
			case w.tagged && !f.unmapped:
				want |= uint64(symbolize.PythonTag(f.file, f.name)) << 48
			}
			if got.Frames[2*i] != want {
				t.Errorf("%s, frame %d: code word %#x, want %#x", w.what, i, got.Frames[2*i], want)
			}
			wantInstr := (code+184+f.instr)&(1<<48-1) | uint64(f.entry)<<48
			if got.Frames[2*i+1] != wantInstr {
				t.Errorf("%s, frame %d: instruction word %#x, want %#x", w.what, i, got.Frames[2*i+1], wantInstr)
			}
		}
	}
}

// TestPythonNameTag walks one frame whose code object's co_name is a str
// in memory (python.h's py_name_tag): with a cache generation and str
// offsets, its tag folds in the name's length and first 16 bytes of
// characters, as symbolize.PythonNameTag does from the same bytes. The
// bytes past the characters do not count; another name at the same
// address, read after the code object's free, gives another tag.
func TestPythonNameTag(t *testing.T) {
	objs := loadUnwindTest(t)
	mem := newStack(t)
	base := mem.base()
	const (
		codeOff, prevOff, instrOff, namesOff = 32, 48, 56, 112
		codeAt, fileAt, nameAt               = 0x800, 0xa00, 0xc00
	)
	// A compact str: its length, state (kind, compact, ascii) and
	// characters from ascii or compact.
	str := func(chars []byte, n, kind uint64, ascii bool, asciiOff, compactOff uint32, junk byte) {
		for i := range uint64(0x100) {
			mem[nameAt+i] = junk
		}
		mem.put(nameAt+16, n)
		state := kind<<2 | 1<<5
		data := uint64(compactOff)
		if ascii {
			state |= 1 << 6
			data = uint64(asciiOff)
		}
		mem.put(nameAt+32, state)
		copy(mem[nameAt+data:], chars)
	}
	mem.put(codeAt+namesOff, base+fileAt)
	mem.put(codeAt+namesOff+8, base+nameAt)
	mem.put(codeOff, base+codeAt)
	mem.put(instrOff, base+codeAt+0x100)
	ucs2 := []byte{0xe9, 0, 't', 0, 0xe9, 0} // "été" in UCS-2
	tests := []struct {
		name              string
		chars             []byte
		n, kind           uint64
		ascii             bool
		asciiOff, compOff uint32
	}{
		{"3.11 short", []byte("f7"), 2, 1, true, 48, 72},
		{"3.11 eight", []byte("abcdefgh"), 8, 1, true, 48, 72},
		{"3.11 twelve", []byte("abcdefghijkl"), 12, 1, true, 48, 72},
		{"3.11 long", []byte("a_function_of_twenty"), 20, 1, true, 48, 72},
		{"3.11 UCS-2", ucs2, 3, 2, false, 48, 72},
		{"3.12 short", []byte("f9"), 2, 1, true, 40, 56},
		{"3.12 Latin-1", []byte{0xe9, 't', 0xe9}, 3, 1, false, 40, 56},
		{"empty", nil, 0, 1, true, 40, 56},
	}
	seen := map[uint16]string{}
	for gen, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tags [2]uint64
			for i, junk := range []byte{0x00, 0xa5} {
				str(tt.chars, tt.n, tt.kind, tt.ascii, tt.asciiOff, tt.compOff, junk)
				in := pyWalkTest{Frame: base, CodeOff: codeOff, PrevOff: prevOff, InstrOff: instrOff,
					NamesOff: namesOff, Gen: uint32(100 + gen), Freed: base + codeAt,
					ASCIIOff: tt.asciiOff, CompactOff: tt.compOff}
				runCtx(t, objs.PyWalk, &in)
				var got bpftest.UnwindWalkFrames
				if err := objs.Frames.Lookup(uint32(0), &got); err != nil {
					t.Fatal(err)
				}
				if in.N != 1 || got.Frames[0]&(1<<48-1) != base+codeAt {
					t.Fatalf("%d frames, code word %#x: want 1, %#x", in.N, got.Frames[0], base+codeAt)
				}
				tags[i] = got.Frames[0] >> 48
				want := symbolize.PythonNameTag(base+fileAt, base+nameAt, mem[nameAt+16:nameAt+16+symbolize.PythonNameRead],
					tt.asciiOff, tt.compOff)
				if tags[i] != uint64(want) {
					t.Errorf("junk %#x: tag %#x, PythonNameTag %#x", junk, tags[i], want)
				}
			}
			if tags[0] != tags[1] {
				t.Errorf("the bytes past the characters changed the tag: %#x, %#x", tags[0], tags[1])
			}
			if other, ok := seen[uint16(tags[0])]; ok {
				t.Errorf("tag %#x, as %s's: the same pointers, other characters", tags[0], other)
			}
			seen[uint16(tags[0])] = tt.name
		})
	}
}
