// Package unwind builds compact unwind tables for x86-64 ELF files from
// their call frame information (.eh_frame, .debug_frame): for every PC, how
// to find the canonical frame address (CFA), and with it the return address
// (at CFA-8) and the caller's rbp. The rows are what a BPF stack walker
// looks up per frame; this package has no eBPF imports and is tested
// against binutils' own CFI interpreter (readelf --debug-dump=frames-interp).
package unwind

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Kind is how the CFA is computed at a PC. The values match enum
// unwind_kind in bpf/memtrace.h (tracer's TestConstants).
type Kind uint8

const (
	// KindUndefined: no usable unwind information here; a stack walk stops
	// (truncated) at such a PC.
	KindUndefined Kind = 0
	// KindRSP: CFA = rsp + CFAOffset.
	KindRSP Kind = 1
	// KindRBP: CFA = rbp + CFAOffset.
	KindRBP Kind = 2
	// KindPLT: the PLT's expression, CFA = rsp + 8 + ((rip & 15) >= N ? 8 : 0)
	// with N in CFAOffset: 11 for GNU ld's lazy PLT, 9 for its IBT PLT
	// (-z ibtplt; TestPLT). The rip is the PC looked up.
	KindPLT Kind = 3
	// KindDerefRBP: CFA = *(rbp + CFAOffset), and the caller's rbp is at
	// *(rbp). GCC's stack realignment through a DRAP register:
	// CFA expression DW_OP_breg6 N; DW_OP_deref, rbp rule DW_OP_breg6 0.
	KindDerefRBP Kind = 4
	// KindSignal: a signal trampoline (an FDE whose CIE has augmentation 'S',
	// e.g. glibc's __restore_rt): the interrupted registers are in the
	// ucontext at rsp. The interrupted PC is exact, not a return address.
	KindSignal Kind = 5
	// KindEnd: the return address is undefined (DW_CFA_undefined rip): the
	// outermost frame (_start, a thread's first function); the stack is
	// complete here.
	KindEnd Kind = 6
)

func (k Kind) String() string {
	switch k {
	case KindUndefined:
		return "undefined"
	case KindRSP:
		return "rsp"
	case KindRBP:
		return "rbp"
	case KindPLT:
		return "plt"
	case KindDerefRBP:
		return "deref-rbp"
	case KindSignal:
		return "signal"
	case KindEnd:
		return "end"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Where a KindSignal frame's interrupted registers are, relative to rsp at
// the trampoline: the kernel's rt_sigframe on x86-64, after the return
// into __restore_rt has popped pretcode, starts with the struct ucontext,
// whose uc_mcontext (struct sigcontext) is at offset 40. Build only gives
// KindSignal where the trampoline's CFI says exactly this.
const (
	SignalRBPOffset = 120 // uc_mcontext.rbp
	SignalRSPOffset = 160 // uc_mcontext.rsp
	SignalRIPOffset = 168 // uc_mcontext.rip
)

// Flags on a row, set by Mark.
const (
	FlagWrapper uint8 = 1 << 7 // PC range belongs to an allocation wrapper function
	FlagAnon    uint8 = 1 << 6 // PC range not covered by any named function symbol
	// FlagMemFn: libc's memory functions, the allocator, read(2): a page
	// fault in them is charged to their caller (ROW_MEMFN in bpf/).
	FlagMemFn uint8 = 1 << 5
)

// The rest of an encoded row's kind byte (see Encode): the Kind, and
// whether rbp was saved. tracer's tests check these, the flags and the
// kinds against bpf/memtrace.h (enum row_flag, enum unwind_kind).
const (
	KindMask    uint8 = 0x07
	RBPSavedBit uint8 = 1 << 3
)

// Row is the rule from PC (a file-relative ELF virtual address, in the
// p_vaddr space) up to the next row's PC.
//
// The fields are ordered for size (24 bytes): large files have a million rows.
type Row struct {
	PC        uint64
	CFAOffset int32
	RBPOffset int32
	Kind      Kind
	RBPSaved  bool // rbp saved at CFA + RBPOffset (DW_CFA_offset r6); else unchanged in this frame
	Flags     uint8
}

func (r Row) String() string {
	s := fmt.Sprintf("%#x %s", r.PC, r.Kind)
	switch r.Kind {
	case KindRSP, KindRBP, KindDerefRBP, KindPLT:
		s += fmt.Sprintf("%+d", r.CFAOffset)
	}
	if r.RBPSaved {
		s += fmt.Sprintf(" rbp=c%+d", r.RBPOffset)
	}
	if r.Flags != 0 {
		s += fmt.Sprintf(" flags=%#x", r.Flags)
	}
	return s
}

// sameRule reports whether two rows say the same thing (all but the PC).
func sameRule(a, b Row) bool {
	a.PC = b.PC
	return a == b
}

// Table is a file's unwind rows, sorted by PC, strictly increasing, with
// adjacent identical rules merged. A table with no rows means the file has
// no call frame information.
type Table struct {
	Rows []Row
}

// Lookup returns the row whose range contains pc; ok is false before the
// first row.
func (t *Table) Lookup(pc uint64) (Row, bool) {
	i := sort.Search(len(t.Rows), func(i int) bool { return t.Rows[i].PC > pc })
	if i == 0 {
		return Row{}, false
	}
	return t.Rows[i-1], true
}

// Clone returns a deep copy, for callers that Mark a cached table.
func (t *Table) Clone() *Table {
	return &Table{Rows: append([]Row(nil), t.Rows...)}
}

// Span is a PC range [Start, End) to Mark with Flag.
type Span struct {
	Start, End uint64
	Flag       uint8
}

// Mark sets flag on [start, end), splitting rows at start and end as
// needed. Addresses before the first row get a KindUndefined row carrying
// the flag. To mark many ranges, MarkAll them at once: each Mark rewrites
// the table.
func (t *Table) Mark(start, end uint64, flag uint8) {
	t.MarkAll([]Span{{start, end, flag}})
}

// MarkAll marks every span, as Mark would one after the other, in one pass
// over the table: a big program marks ~100k functions, and marking them
// one by one (a row inserted mid-table each time) took node's 376k rows
// 7.4 s. Rows that end up repeating their predecessor's rule merge. The
// rows are replaced, never changed in place: a table sharing the old
// slice keeps it as it was.
func (t *Table) MarkAll(spans []Span) {
	type edge struct {
		pc  uint64
		bit int // flag bit
		add int // +1 at a span's start, -1 at its end
	}
	edges := make([]edge, 0, 2*len(spans))
	for _, s := range spans {
		if s.Start >= s.End {
			continue
		}
		for bit := range 8 {
			if s.Flag&(1<<bit) != 0 {
				edges = append(edges, edge{s.Start, bit, 1}, edge{s.End, bit, -1})
			}
		}
	}
	if len(edges) == 0 {
		return
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.pc, b.pc) })
	var active [8]int // spans covering the current PC, per flag bit
	out := make([]Row, 0, len(t.Rows)+len(edges)/2)
	base := Row{} // the rule in force: before the first row, undefined
	i, j := 0, 0
	for i < len(t.Rows) || j < len(edges) {
		pc := uint64(math.MaxUint64)
		if i < len(t.Rows) {
			pc = t.Rows[i].PC
		}
		if j < len(edges) {
			pc = min(pc, edges[j].pc)
		}
		for ; j < len(edges) && edges[j].pc == pc; j++ {
			active[edges[j].bit] += edges[j].add
		}
		if i < len(t.Rows) && t.Rows[i].PC == pc {
			base = t.Rows[i]
			i++
		}
		row := base
		row.PC = pc
		for bit, n := range active {
			if n > 0 {
				row.Flags |= 1 << bit
			}
		}
		if n := len(out); n > 0 && sameRule(out[n-1], row) {
			continue
		}
		out = append(out, row)
	}
	t.Rows = out
}

// RowSize is the size of one encoded row.
const RowSize = 8

// FramePointer gives the ranges ([start, end), sorted, not overlapping) a
// frame-pointer rule where they have none (KindUndefined): CFA = rbp + 16,
// rbp saved at CFA - 16, as after "push rbp; mov rbp, rsp". For code
// without CFI that keeps frame pointers, at its calls (never at its first
// instructions): V8's embedded builtins in node. One pass over the table,
// whatever the number of ranges. As MarkAll, it replaces the rows.
func (t *Table) FramePointer(ranges [][2]uint64) {
	if len(ranges) == 0 {
		return
	}
	fp := Row{Kind: KindRBP, CFAOffset: 16, RBPSaved: true, RBPOffset: -16}
	out := make([]Row, 0, len(t.Rows)+2*len(ranges))
	emit := func(r Row) {
		if n := len(out); n > 0 && out[n-1].PC == r.PC {
			out = out[:n-1] // one range ends where the next starts: the later edge holds
		}
		if n := len(out); n > 0 && sameRule(out[n-1], r) {
			return
		}
		out = append(out, r)
	}
	// at gives the row in effect at pc, with the frame-pointer rule when
	// pc is in a range and the row has no rule.
	at := func(pc uint64, row Row, inRange bool) Row {
		row.PC = pc
		if inRange && row.Kind == KindUndefined {
			flags := row.Flags
			row = fp
			row.PC, row.Flags = pc, flags
		}
		return row
	}
	ri, k := 0, 0 // the next row, the next range edge (2i: start of range i, 2i+1: its end)
	cur := Row{}  // the row in effect (none before the first)
	in := false   // whether the last edge passed was a range's start
	for ri < len(t.Rows) || k < 2*len(ranges) {
		var edge uint64 = math.MaxUint64
		if k < 2*len(ranges) {
			edge = ranges[k/2][k%2]
		}
		switch {
		case ri < len(t.Rows) && t.Rows[ri].PC < edge:
			cur = t.Rows[ri]
			emit(at(cur.PC, cur, in))
			ri++
		case ri < len(t.Rows) && t.Rows[ri].PC == edge:
			cur = t.Rows[ri]
			in = k%2 == 0
			emit(at(edge, cur, in))
			ri++
			k++
		default:
			in = k%2 == 0
			emit(at(edge, cur, in))
			k++
		}
	}
	t.Rows = out
}

// Encode returns the rows in the BPF layout, RowSize bytes per row, little
// endian:
//
//	struct unwind_row { __u32 pc; __s16 cfa_off; __u8 kind; __s8 rbp_off8; };
//
// kind byte: bits 0-2 Kind, bit 3 RBPSaved, bit 5 FlagMemFn, bit 6
// FlagAnon, bit 7 FlagWrapper; rbp_off8 = RBPOffset / 8. Build only produces encodable
// rows; a row that does not fit (a PC above 4 GiB, an offset out of range)
// is an error.
func (t *Table) Encode() ([]byte, error) {
	out := make([]byte, len(t.Rows)*RowSize)
	for i, r := range t.Rows {
		if err := encodable(r); err != nil {
			return nil, fmt.Errorf("encode row %v: %w", r, err)
		}
		b := out[i*RowSize:]
		binary.LittleEndian.PutUint32(b, uint32(r.PC))
		binary.LittleEndian.PutUint16(b[4:], uint16(int16(r.CFAOffset)))
		kind := uint8(r.Kind) | r.Flags&rowFlags
		if r.RBPSaved {
			kind |= RBPSavedBit
		}
		b[6] = kind
		b[7] = uint8(int8(r.RBPOffset / 8))
	}
	return out, nil
}

// Decode is the inverse of Encode.
func Decode(b []byte) (*Table, error) {
	if len(b)%RowSize != 0 {
		return nil, fmt.Errorf("decode %d bytes: not a multiple of %d", len(b), RowSize)
	}
	t := &Table{Rows: make([]Row, len(b)/RowSize)}
	for i := range t.Rows {
		p := b[i*RowSize:]
		kind := p[6]
		r := Row{
			PC:        uint64(binary.LittleEndian.Uint32(p)),
			CFAOffset: int32(int16(binary.LittleEndian.Uint16(p[4:]))),
			Kind:      Kind(kind & KindMask),
			RBPSaved:  kind&RBPSavedBit != 0,
			Flags:     kind & rowFlags,
		}
		if r.RBPSaved {
			r.RBPOffset = int32(int8(p[7])) * 8
		}
		if r.Kind > KindEnd || kind&0x10 != 0 || (!r.RBPSaved && p[7] != 0) {
			return nil, fmt.Errorf("decode row %d: bad kind byte %#x or rbp offset", i, kind)
		}
		if i > 0 && r.PC <= t.Rows[i-1].PC {
			return nil, fmt.Errorf("decode row %d: pc %#x not above %#x", i, r.PC, t.Rows[i-1].PC)
		}
		t.Rows[i] = r
	}
	return t, nil
}

// rowFlags are the flags a row can carry.
const rowFlags = FlagAnon | FlagWrapper | FlagMemFn

// encodable reports why r does not fit the BPF layout, or nil.
func encodable(r Row) error {
	switch {
	case r.PC > math.MaxUint32:
		return fmt.Errorf("pc %#x above 32 bits", r.PC)
	case r.Kind > KindEnd:
		return fmt.Errorf("kind %d", r.Kind)
	case r.CFAOffset < math.MinInt16 || r.CFAOffset > math.MaxInt16:
		return fmt.Errorf("CFA offset %d beyond 16 bits", r.CFAOffset)
	case r.RBPSaved && (r.RBPOffset%8 != 0 || r.RBPOffset/8 < math.MinInt8 || r.RBPOffset/8 > math.MaxInt8):
		return fmt.Errorf("rbp offset %d not a multiple of 8 within ±1 KiB", r.RBPOffset)
	case r.Flags&^rowFlags != 0:
		return fmt.Errorf("flags %#x", r.Flags)
	}
	return nil
}

// ruleRow turns an interpreted CFI state into a row, or KindUndefined where
// the state cannot be represented: a wrong rule would send the walker to a
// wrong frame, a missing one only truncates the stack.
func ruleRow(c *cie, st regState) Row {
	undefined := Row{Kind: KindUndefined}
	if st.broken {
		return undefined
	}
	if c.signal {
		// The BPF walker reads the interrupted registers at fixed offsets
		// from rsp; take the trampoline only if its CFI says the same.
		cfa, ok := derefExpr(st.cfa.expr, regRSP)
		if st.cfa.kind != cfaExpr || !ok || cfa != SignalRSPOffset ||
			st.ra != (regRule{kind: ruleExprBreg, reg: regRSP, off: SignalRIPOffset}) ||
			st.rbp != (regRule{kind: ruleExprBreg, reg: regRSP, off: SignalRBPOffset}) {
			return undefined
		}
		return Row{Kind: KindSignal}
	}
	if c.raReg != regRIP {
		return undefined
	}
	switch {
	case st.ra.kind == ruleUndefined:
		return Row{Kind: KindEnd}
	case st.ra.kind != ruleOffset || st.ra.off != -8:
		return undefined
	}
	var row Row
	switch st.cfa.kind {
	case cfaReg:
		switch st.cfa.reg {
		case regRSP:
			row.Kind = KindRSP
		case regRBP:
			row.Kind = KindRBP
		default:
			return undefined
		}
		if st.cfa.off < math.MinInt16 || st.cfa.off > math.MaxInt16 {
			return undefined
		}
		row.CFAOffset = int32(st.cfa.off)
	case cfaExpr:
		if n, ok := pltExpr(st.cfa.expr); ok {
			// PLT code neither saves nor changes rbp.
			if st.rbp.kind != ruleUnset && st.rbp.kind != ruleSame {
				return undefined
			}
			return Row{Kind: KindPLT, CFAOffset: int32(n)}
		}
		off, ok := derefExpr(st.cfa.expr, regRBP)
		if !ok || off < math.MinInt16 || off > math.MaxInt16 {
			return undefined
		}
		if st.rbp != (regRule{kind: ruleExprBreg, reg: regRBP}) {
			return undefined
		}
		return Row{Kind: KindDerefRBP, CFAOffset: int32(off)}
	default:
		return undefined
	}
	switch st.rbp.kind {
	case ruleUnset, ruleSame:
	case ruleOffset:
		if st.rbp.off%8 != 0 || st.rbp.off/8 < math.MinInt8 || st.rbp.off/8 > math.MaxInt8 {
			return undefined
		}
		row.RBPSaved = true
		row.RBPOffset = int32(st.rbp.off)
	default:
		return undefined
	}
	return row
}
