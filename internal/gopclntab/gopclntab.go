// Package gopclntab reads a Go executable's function table (.gopclntab):
// each function's name, its range of code, how far the stack pointer is
// below its frame at each pc, each pc's file and line, and (through the
// runtime's module data) the inline trees that name inlined calls. The
// runtime needs these for its own tracebacks, so every Go binary keeps
// them, also one built with `-ldflags="-s -w"` that has neither a symbol
// table nor DWARF: memtrace names Go functions, gives their lines and
// unwinds Go frames from them. Go 1.18 and later (table versions 1.18 and
// 1.20, which Go 1.26 still writes); older tables return ErrVersion. It
// imports nothing from eBPF.
package gopclntab

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// ErrNoTable: the file has no .gopclntab (not a Go executable).
var ErrNoTable = errors.New("no Go function table")

// ErrVersion: a table of a Go release before 1.18, or of another
// architecture's word size.
var ErrVersion = errors.New("unsupported Go function table")

// ErrMalformed: the table's offsets point outside it.
var ErrMalformed = errors.New("malformed Go function table")

// The table's magic numbers (runtime/symtab.go, abi.PCLnTabMagic).
const (
	magic118 = 0xfffffff0
	magic120 = 0xfffffff1
)

// Func is one function of the table.
type Func struct {
	Name       string
	Entry, End uint64 // [Entry, End): ELF virtual addresses
	// pc-value tables: the stack pointer's offset, the source file (an
	// index into the compile unit's files, from cu in cutab), the line, and
	// the inlined call the code belongs to (-1: the function's own).
	pcsp, pcfile, pcln, inl []byte
	cu                      uint64
	inlTree                 uint32 // its inline tree's offset from the module's gofunc; ^0: none
}

// Table is a Go executable's functions, sorted by Entry.
type Table struct {
	Funcs          []Func
	minLC          uint64 // the pc quantum (1 on x86-64)
	cutab, filetab []byte
	funcnames      []byte
	go118          bool   // the Go 1.18 and 1.19 layouts
	data           []byte // the whole table
	addr, text     uint64 // the table's and the text's addresses (addr: Read's)
	// The inline trees: the bytes of the section holding the module's
	// gofunc (go:func.*), from gofunc on; nil when it was not found.
	gofunc []byte
}

// pcdataInlTree is PCDATA_InlTreeIndex (internal/abi): the pc-value table
// of the inlined call each pc belongs to.
const pcdataInlTree = 2

// funcdataInlTree is FUNCDATA_InlTree: a function's inline tree.
const funcdataInlTree = 3

// maxTableBytes bounds a function table, and the data sections read to
// find its inline trees: the biggest Go programs' tables are some tens of
// MB; a header claiming more is hostile, and would make memtrace allocate
// (or inflate) what it claims.
const maxTableBytes = 1 << 30

// Read finds and parses the function table of f. Function entries are
// offsets from the start of the text, which is .text's address.
func Read(f *elf.File) (*Table, error) {
	sec := f.Section(".gopclntab")
	if sec == nil {
		sec = f.Section(".data.rel.ro.gopclntab")
	}
	text := f.Section(".text")
	if sec == nil || sec.Type == elf.SHT_NOBITS || text == nil {
		return nil, ErrNoTable
	}
	if sec.Size > maxTableBytes {
		return nil, fmt.Errorf(".gopclntab: %d bytes, more than %d: %w", sec.Size, maxTableBytes, ErrMalformed)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .gopclntab: %w", err)
	}
	t, err := Parse(data, text.Addr)
	if err != nil {
		return nil, err
	}
	t.addr = sec.Addr
	return t, nil
}

// FindInlineTrees locates, in f (the file Read read t from), the inline
// trees that Line and Inlined need for inlined code. Only symbolizing
// needs them: unwinding and naming functions do not.
func (t *Table) FindInlineTrees(f *elf.File) {
	if t.addr == 0 {
		return
	}
	t.gofunc = inlineTrees(f, t.addr, t.data, t.text, t.go118)
	if !t.plausibleTrees() {
		t.gofunc = nil
	}
}

// plausibleTrees checks the first entry of up to 64 functions' inline
// trees: a known function ID, a name in the table, a call site inside the
// function and, from Go 1.20, a start line. A module data of an unforeseen
// layout would fail it: no inline names then, rather than wrong ones.
func (t *Table) plausibleTrees() bool {
	if t.gofunc == nil {
		return false
	}
	checked := 0
	for _, fn := range t.Funcs {
		if fn.inlTree == ^uint32(0) {
			continue
		}
		name, _, ok := t.inlinedCall(fn, 0)
		at := uint64(fn.inlTree)
		if !ok || name == "" || at+16 > uint64(len(t.gofunc)) {
			return false
		}
		funcID, line := t.gofunc[at], int32(binary.LittleEndian.Uint32(t.gofunc[at+12:]))
		if t.go118 {
			funcID = t.gofunc[at+2]
		}
		if funcID > 64 || (!t.go118 && line <= 0) {
			return false
		}
		if checked++; checked == 64 {
			break
		}
	}
	return checked > 0
}

// inlineTrees returns the bytes from the module's gofunc (go:func.*, where
// functions' inline trees are) to the end of its section, or nil. gofunc
// is a field of the runtime's module data (runtime.firstmoduledata), found
// in its data section as the word that points at the table, followed by
// slices into it (funcnametab, cutab) and, further on, the text's
// address. A position-independent executable keeps these words in its
// relocations instead: not found, no inline trees.
func inlineTrees(f *elf.File, tabAddr uint64, tab []byte, text uint64, go118 bool) []byte {
	le := binary.LittleEndian
	funcnames, cutab := tabAddr+le.Uint64(tab[8+8*3:]), tabAddr+le.Uint64(tab[8+8*4:])
	// Word indices in moduledata (runtime/symtab.go): pcHeader 0,
	// funcnametab 1-3, cutab 4-6, ..., text 22, then Go 1.20's covctrs
	// and ecovctrs before end, ..., rodata, gofunc.
	const textWord = 22
	gofuncWord := 40
	if go118 {
		gofuncWord = 38
	}
	// Go 1.26 gives it a section of its own; before, it is in .noptrdata.
	for _, name := range []string{".go.module", ".noptrdata", ".data"} {
		sec := f.Section(name)
		if sec == nil || sec.Type == elf.SHT_NOBITS || sec.Size > maxTableBytes {
			continue
		}
		d, err := sec.Data()
		if err != nil {
			continue
		}
		for i := 0; i+8*(gofuncWord+1) <= len(d); i += 8 {
			w := func(k int) uint64 { return le.Uint64(d[i+8*k:]) }
			if w(0) != tabAddr || w(1) != funcnames || w(4) != cutab || w(textWord) != text {
				continue
			}
			gofunc := w(gofuncWord)
			if gofunc < w(gofuncWord-1) { // rodata, just before it
				return nil
			}
			for _, s := range f.Sections {
				if s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_ALLOC != 0 && gofunc >= s.Addr && gofunc < s.Addr+s.Size && s.Size <= maxTableBytes {
					b, err := s.Data()
					if err != nil || uint64(len(b)) < gofunc-s.Addr {
						return nil
					}
					return b[gofunc-s.Addr:]
				}
			}
			return nil
		}
	}
	return nil
}

// Parse reads a little-endian 64-bit function table whose text starts at
// text.
func Parse(data []byte, text uint64) (*Table, error) {
	le := binary.LittleEndian
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(data))
	}
	if m := le.Uint32(data); m != magic118 && m != magic120 {
		return nil, fmt.Errorf("%w: magic %#x", ErrVersion, m)
	}
	minLC, ptrSize := uint64(data[6]), data[7]
	if ptrSize != 8 || minLC == 0 {
		return nil, fmt.Errorf("%w: pointer size %d, pc quantum %d", ErrVersion, ptrSize, minLC)
	}
	// The header: magic, pads, minLC, ptrSize, then nfunc, nfiles, an
	// unused word (once textStart) and five offsets, one word each.
	const hdr = 8 + 8*8
	if len(data) < hdr {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrMalformed, len(data))
	}
	word := func(i int) uint64 { return le.Uint64(data[8+8*i:]) }
	nfunc := word(0)
	funcnames, cutab, filetab, pctab, pcln := word(3), word(4), word(5), word(6), word(7)
	size := uint64(len(data))
	if funcnames > size || cutab > size || filetab > size || pctab > size || pcln > size ||
		nfunc > size/8 || pcln+(nfunc+1)*8 > size {
		return nil, fmt.Errorf("%w: offsets past its %d bytes", ErrMalformed, size)
	}
	// The _func record: 40 bytes before Go 1.20, 44 since (startLine),
	// then its pcdata tables' offsets, a uint32 each.
	funcSize, go118 := uint64(44), le.Uint32(data) == magic118
	if go118 {
		funcSize = 40
	}
	// functab: nfunc+1 pairs of (entry offset, _func offset from pcln);
	// the last entry offset is the end of the last function.
	functab := data[pcln:]
	t := &Table{Funcs: make([]Func, 0, nfunc), minLC: minLC, cutab: data[cutab:], filetab: data[filetab:],
		funcnames: data[funcnames:], go118: go118, data: data, text: text}
	// table returns the pc-value table at offset off of pctab, nil for none.
	table := func(off uint64) []byte {
		if off == 0 || pctab+off >= size {
			return nil
		}
		return data[pctab+off:]
	}
	for i := range nfunc {
		entry := uint64(le.Uint32(functab[8*i:]))
		end := uint64(le.Uint32(functab[8*(i+1):]))
		off := pcln + uint64(le.Uint32(functab[8*i+4:]))
		// _func: entryOff, nameOff, args, deferreturn, pcsp, ...
		if off+20 > size || end < entry {
			return nil, fmt.Errorf("%w: function %d", ErrMalformed, i)
		}
		nameOff := uint64(le.Uint32(data[off+4:]))
		name, ok := cString(data, funcnames+nameOff)
		if !ok || off+funcSize > size {
			return nil, fmt.Errorf("%w: function %d", ErrMalformed, i)
		}
		fn := Func{Name: name, Entry: text + entry, End: text + end,
			pcsp:    table(uint64(le.Uint32(data[off+16:]))),
			pcfile:  table(uint64(le.Uint32(data[off+20:]))),
			pcln:    table(uint64(le.Uint32(data[off+24:]))),
			cu:      uint64(le.Uint32(data[off+32:])),
			inlTree: ^uint32(0),
		}
		npcdata, nfuncdata := uint64(le.Uint32(data[off+28:])), uint64(data[off+funcSize-1])
		if off+funcSize+4*(npcdata+nfuncdata) > size {
			return nil, fmt.Errorf("%w: function %d", ErrMalformed, i)
		}
		if npcdata > pcdataInlTree {
			fn.inl = table(uint64(le.Uint32(data[off+funcSize+4*pcdataInlTree:])))
		}
		if nfuncdata > funcdataInlTree {
			fn.inlTree = le.Uint32(data[off+funcSize+4*(npcdata+funcdataInlTree):])
		}
		t.Funcs = append(t.Funcs, fn)
	}
	return t, nil
}

func cString(data []byte, off uint64) (string, bool) {
	if off >= uint64(len(data)) {
		return "", false
	}
	n := bytes.IndexByte(data[off:], 0)
	if n < 0 {
		return "", false
	}
	return string(data[off : off+uint64(n)]), true
}

// SPRange is a run of pcs, [PC, End), where the stack pointer is Delta
// bytes below where it was at the function's entry (after the call pushed
// the return address).
type SPRange struct {
	PC, End uint64
	Delta   int64
}

// SPDeltas returns fn's stack pointer offsets, in pc order, covering
// [Entry, End) or a prefix of it; nil when the table has none.
func (t *Table) SPDeltas(fn Func) ([]SPRange, error) {
	var out []SPRange
	err := t.runs(fn, fn.pcsp, func(pc, end uint64, val int64) bool {
		out = append(out, SPRange{PC: pc, End: end, Delta: val})
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// value returns the value a pc-value table gives pc, in fn.
func (t *Table) value(fn Func, p []byte, target uint64) (v int64, found bool) {
	if target < fn.Entry || target >= fn.End {
		return 0, false
	}
	err := t.runs(fn, p, func(pc, end uint64, val int64) bool {
		if target < end {
			v, found = val, true
			return false
		}
		return true
	})
	return v, found && err == nil
}

// runs decodes fn's pc-value table p, calling yield with each run of
// pcs [pc, end) that share a value, in pc order, until yield returns
// false or the table ends. The table: pairs of (zig-zag value delta, pc
// delta in quanta), varints, from the value -1 at the entry; a value holds
// from the previous pc up to the new one. A zero value delta after the
// first pair ends it.
func (t *Table) runs(fn Func, p []byte, yield func(pc, end uint64, val int64) bool) error {
	if p == nil {
		return nil
	}
	pc, val := fn.Entry, int64(-1)
	for first := true; first || pc < fn.End; first = false {
		uv, n := binary.Uvarint(p)
		if n <= 0 {
			return fmt.Errorf("%w: pc-value table of %s", ErrMalformed, fn.Name)
		}
		if uv == 0 && !first {
			return nil
		}
		p = p[n:]
		val += int64(-(uv & 1) ^ (uv >> 1))
		pcd, n := binary.Uvarint(p)
		if n <= 0 {
			return fmt.Errorf("%w: pc-value table of %s", ErrMalformed, fn.Name)
		}
		p = p[n:]
		next := pc + pcd*t.minLC
		if next > fn.End || next < pc {
			return fmt.Errorf("%w: pc-value table of %s runs past its end", ErrMalformed, fn.Name)
		}
		if next > pc && !yield(pc, next, val) {
			return nil
		}
		pc = next
	}
	return nil
}

// Func returns the function whose code holds pc.
func (t *Table) Func(pc uint64) (Func, bool) {
	i := sort.Search(len(t.Funcs), func(i int) bool { return t.Funcs[i].Entry > pc }) - 1
	if i < 0 || pc >= t.Funcs[i].End {
		return Func{}, false
	}
	return t.Funcs[i], true
}

// Line returns the source file and line of the instruction at pc: for
// code inlined into its function, the inlined function's (Inlined names
// the chain). When the inline trees were not found (a position-independent
// executable, or FindInlineTrees not called), inlined code gets no line: a
// line of a function the report cannot name would mislead.
func (t *Table) Line(pc uint64) (file string, line int, ok bool) {
	fn, ok := t.Func(pc)
	if !ok {
		return "", 0, false
	}
	if fn.inl != nil && t.gofunc == nil {
		if idx, ok := t.value(fn, fn.inl, pc); !ok || idx >= 0 {
			return "", 0, false
		}
	}
	return t.position(fn, pc)
}

// position is the file and line the table gives pc, in fn.
func (t *Table) position(fn Func, pc uint64) (file string, line int, ok bool) {
	fileno, ok1 := t.value(fn, fn.pcfile, pc)
	ln, ok2 := t.value(fn, fn.pcln, pc)
	if !ok1 || !ok2 || fileno < 0 || ln <= 0 {
		return "", 0, false
	}
	at := 4 * (fn.cu + uint64(fileno))
	if at+4 > uint64(len(t.cutab)) {
		return "", 0, false
	}
	off := binary.LittleEndian.Uint32(t.cutab[at:])
	if off == ^uint32(0) {
		return "", 0, false
	}
	name, ok := cString(t.filetab, uint64(off))
	if !ok {
		return "", 0, false
	}
	return name, int(ln), true
}

// InlineFrame is one function of the chain of inlined calls at a pc.
type InlineFrame struct {
	Function string
	File     string
	Line     int
}

// Inlined returns the chain of inlined calls at pc, innermost first: the
// inlined function at pc with the file and line of pc, then each caller
// with the file and line of its call, the last being pc's function. nil
// when pc is its function's own code, or the inline tree is not known.
func (t *Table) Inlined(pc uint64) []InlineFrame {
	fn, ok := t.Func(pc)
	if !ok || fn.inl == nil || fn.inlTree == ^uint32(0) || t.gofunc == nil {
		return nil
	}
	idx, ok := t.value(fn, fn.inl, pc)
	if !ok || idx < 0 {
		return nil
	}
	file, line, ok := t.position(fn, pc)
	if !ok {
		return nil
	}
	var out []InlineFrame
	for range 64 { // bounds a malformed tree's loop
		name, parentPC, ok := t.inlinedCall(fn, idx)
		if !ok || name == fn.Name {
			return nil // runtime._System and its kin mark themselves so: no call
		}
		out = append(out, InlineFrame{Function: name, File: file, Line: line})
		at := fn.Entry + parentPC
		if file, line, ok = t.position(fn, at); !ok {
			return nil
		}
		if idx, ok = t.value(fn, fn.inl, at); !ok {
			return nil
		}
		if idx < 0 {
			return append(out, InlineFrame{Function: fn.Name, File: file, Line: line})
		}
	}
	return nil
}

// inlinedCall reads entry idx of fn's inline tree: the called function's
// name and the offset from fn's entry of an instruction at its call site.
func (t *Table) inlinedCall(fn Func, idx int64) (name string, parentPC uint64, ok bool) {
	le := binary.LittleEndian
	// Go 1.20: funcID, 3 bytes, nameOff, parentPc, startLine; Go 1.18:
	// parent (int16), funcID, a byte, file, line, nameOff, parentPc.
	size, nameAt, parentAt := uint64(16), uint64(4), uint64(8)
	if t.go118 {
		size, nameAt, parentAt = 20, 12, 16
	}
	at := uint64(fn.inlTree) + uint64(idx)*size
	if idx < 0 || at+size > uint64(len(t.gofunc)) {
		return "", 0, false
	}
	nameOff, parent := le.Uint32(t.gofunc[at+nameAt:]), int32(le.Uint32(t.gofunc[at+parentAt:]))
	name, ok = cString(t.funcnames, uint64(nameOff))
	if !ok || parent < 0 || fn.Entry+uint64(parent) >= fn.End {
		return "", 0, false
	}
	return name, uint64(parent), true
}
