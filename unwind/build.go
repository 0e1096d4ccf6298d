package unwind

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"
)

// ErrUnsupportedMachine is returned for ELF files that are not x86-64.
var ErrUnsupportedMachine = errors.New("unwind tables are built for x86-64 only")

// span is one FDE's rows, before the FDEs are merged into a table.
type span struct {
	start, end uint64
	rows       []Row // PCs within [start, end), the first at start
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
	var spans []span
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		s := f.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
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
		more, err := sectionSpans(sec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if name == ".debug_frame" {
			more = uncovered(spans, more)
		}
		spans = append(spans, more...)
	}
	return assemble(spans), nil
}

// sectionSpans parses one frame section and interprets every FDE.
func sectionSpans(sec frameSection) ([]span, error) {
	fdes, err := parseFrames(sec)
	if err != nil {
		return nil, err
	}
	spans := make([]span, 0, len(fdes))
	for _, f := range fdes {
		lrows := fdeRows(sec, f)
		rows := make([]Row, 0, len(lrows))
		for _, lr := range lrows {
			row := ruleRow(f.cie, lr.state)
			row.PC = lr.loc
			if n := len(rows); n > 0 && sameRule(rows[n-1], row) {
				continue
			}
			rows = append(rows, row)
		}
		spans = append(spans, span{start: f.start, end: f.end, rows: rows})
	}
	return spans, nil
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

// assemble merges the spans into one table. Where spans overlap, the one
// starting later takes over from its start; each span ends with a
// KindUndefined row unless the next one starts right there.
func assemble(spans []span) *Table {
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var rows []Row
	for _, s := range spans {
		for len(rows) > 0 && rows[len(rows)-1].PC >= s.start {
			rows = rows[:len(rows)-1]
		}
		rows = append(rows, s.rows...)
		rows = append(rows, Row{PC: s.end, Kind: KindUndefined})
	}
	merged := rows[:0]
	for _, r := range rows {
		if n := len(merged); n > 0 && sameRule(merged[n-1], r) {
			continue
		}
		merged = append(merged, r)
	}
	return &Table{Rows: merged}
}
