package unwind

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/memtrace/memtrace/internal/gopclntab"
)

// ErrUnsupportedMachine is returned for ELF files that are not x86-64.
var ErrUnsupportedMachine = errors.New("unwind tables are built for x86-64 only")

// span is one FDE's rows, before the FDEs are merged into a table: rows
// lo to hi of the builder's rows, PCs within [start, end), the first at start.
type span struct {
	start, end uint64
	lo, hi     int
}

// builder collects the rows of all FDEs of a file in one slice.
type builder struct {
	rows  []Row
	spans []span
}

// Build reads the call frame information of an ELF file (.eh_frame, and
// .debug_frame where present, e.g. in a separate debug file or in objects
// without .eh_frame) and returns its table. Each FDE yields rows for its PC
// range; where one FDE ends and no other starts, a KindUndefined row marks
// the gap, so that a PC in a gap never takes the previous function's rule.
// Rules the BPF encoding cannot represent become KindUndefined rows.
// FDEs of .debug_frame count only where no .eh_frame FDE covers their
// start. Malformed input returns an error wrapping ErrMalformed.
func Build(f *elf.File) (*Table, error) {
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("%v %v: %w", f.Class, f.Machine, ErrUnsupportedMachine)
	}
	var b builder
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		s := f.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		// The size is the header's (uncompressed, for a compressed
		// section): refused before anything is read or inflated.
		if s.Size > maxFrameSection {
			return nil, fmt.Errorf("%s: %d bytes, more than %d: %w", name, s.Size, maxFrameSection, ErrMalformed)
		}
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		sec := frameSection{data: data, addr: s.Addr, eh: name == ".eh_frame"}
		if text := f.Section(".text"); text != nil {
			sec.textAddr = text.Addr
		}
		if got := f.Section(".got"); got != nil {
			sec.dataAddr, sec.hasData = got.Addr, true
		}
		n := len(b.spans)
		if err := b.addSection(sec); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if name == ".debug_frame" {
			b.spans = append(b.spans[:n], uncovered(b.spans[:n], b.spans[n:])...)
		}
	}
	n := len(b.spans)
	b.addGoFunctions(f)
	b.spans = append(b.spans[:n], uncovered(b.spans[:n], b.spans[n:])...)
	return b.table(), nil
}

// addGoFunctions adds rows for a Go executable's functions from its
// function table (.gopclntab), which every Go binary keeps: Go writes no
// .eh_frame, and its .debug_frame goes with DWARF (`-ldflags=-w` drops
// it). The rows are those Go's linker writes to .debug_frame on x86-64:
// CFA = rsp + the function's stack pointer offset at the pc + 8, rbp
// unchanged (Go saves it, but says nothing of it there). Frameless
// assembly (runtime.memmove, memclrNoHeapPointers) then unwinds to its
// caller, where rbp would skip it. A table memtrace cannot read adds no
// rows (the walk follows frame pointers there, as before).
func (b *builder) addGoFunctions(f *elf.File) {
	tab, err := gopclntab.Read(f)
	if err != nil {
		return
	}
	for _, fn := range tab.Funcs {
		sp, err := tab.SPDeltas(fn)
		if err != nil || len(sp) == 0 {
			continue
		}
		lo := len(b.rows)
		for _, r := range sp {
			row := Row{PC: r.PC, Kind: KindRSP, CFAOffset: int32(r.Delta + 8)}
			// A frame past the encoding's 16 bits, as Build does with CFI.
			if r.Delta+8 < 0 || encodable(row) != nil {
				row = Row{PC: r.PC, Kind: KindUndefined}
			}
			b.addRow(lo, row)
		}
		b.spans = append(b.spans, span{start: fn.Entry, end: sp[len(sp)-1].End, lo: lo, hi: len(b.rows)})
	}
}

// addSection parses one frame section and interprets every FDE.
func (b *builder) addSection(sec frameSection) error {
	// Most rows take two to six bytes of CFI (an advance and a CFA
	// offset): reserve for the common case instead of growing a slice of
	// a million rows step by step.
	b.rows = slices.Grow(b.rows, len(sec.data)/4)
	p := &program{sec: sec}
	return parseFrames(sec, func(f fde) {
		lo := len(b.rows)
		for _, lr := range p.fdeRows(f) {
			row := ruleRow(f.cie, lr.state)
			row.PC = lr.loc
			b.addRow(lo, row)
		}
		b.spans = append(b.spans, span{start: f.start, end: f.end, lo: lo, hi: len(b.rows)})
	})
}

// addRow appends row to the span whose rows start at lo, unless the
// span's last row has the same rule.
func (b *builder) addRow(lo int, row Row) {
	if n := len(b.rows); n > lo && sameRule(b.rows[n-1], row) {
		return
	}
	b.rows = append(b.rows, row)
}

// uncovered returns the spans of extra whose start no span of base covers.
func uncovered(base, extra []span) []span {
	if len(base) == 0 {
		return extra
	}
	sorted := append([]span(nil), base...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].start < sorted[j].start })
	// maxEnd[i]: the largest end among sorted[:i+1], so that one binary
	// search answers "is pc inside any span" even with nested spans.
	maxEnd := make([]uint64, len(sorted))
	for i, s := range sorted {
		maxEnd[i] = s.end
		if i > 0 && maxEnd[i-1] > s.end {
			maxEnd[i] = maxEnd[i-1]
		}
	}
	var out []span
	for _, s := range extra {
		i := sort.Search(len(sorted), func(i int) bool { return sorted[i].start > s.start })
		if i > 0 && maxEnd[i-1] > s.start {
			continue
		}
		out = append(out, s)
	}
	return out
}

// table merges the spans into one table. Where spans overlap, the one
// starting later takes over from its start; each span ends with a
// KindUndefined row unless the next one starts right there.
func (b *builder) table() *Table {
	spans := b.spans
	slices.SortStableFunc(spans, func(x, y span) int { return cmp.Compare(x.start, y.start) })
	rows := make([]Row, 0, len(b.rows)+len(spans))
	for _, s := range spans {
		for len(rows) > 0 && rows[len(rows)-1].PC >= s.start {
			rows = rows[:len(rows)-1]
		}
		for _, r := range b.rows[s.lo:s.hi] {
			if n := len(rows); n > 0 && sameRule(rows[n-1], r) {
				continue
			}
			rows = append(rows, r)
		}
		if n := len(rows); n == 0 || !sameRule(rows[n-1], Row{}) {
			rows = append(rows, Row{PC: s.end, Kind: KindUndefined})
		}
	}
	return &Table{Rows: slices.Clip(rows)}
}

// maxFrameSection bounds .eh_frame and .debug_frame: node's .eh_frame is
// 2.7 MB, the biggest real ones some tens of MB; a file claiming more is
// hostile, and would make memtrace allocate what it claims.
const maxFrameSection = 1 << 30
