package unwind

import (
	"bytes"
	"reflect"
	"testing"
)

func rows(rs ...Row) *Table { return &Table{Rows: rs} }

func TestLookup(t *testing.T) {
	tab := rows(
		Row{PC: 0x100, Kind: KindRSP, CFAOffset: 8},
		Row{PC: 0x101, Kind: KindRSP, CFAOffset: 16},
		Row{PC: 0x110},
	)
	for _, tt := range []struct {
		pc   uint64
		want Row
		ok   bool
	}{
		{0xff, Row{}, false},
		{0x100, tab.Rows[0], true},
		{0x101, tab.Rows[1], true},
		{0x10f, tab.Rows[1], true},
		{0x110, tab.Rows[2], true},
		{1 << 40, tab.Rows[2], true},
	} {
		got, ok := tab.Lookup(tt.pc)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%#x) = %v, %v; want %v, %v", tt.pc, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := (&Table{}).Lookup(0); ok {
		t.Error("empty table: ok")
	}
}

func TestMark(t *testing.T) {
	rsp8 := Row{Kind: KindRSP, CFAOffset: 8}
	rsp16 := Row{Kind: KindRSP, CFAOffset: 16}
	at := func(pc uint64, r Row, flags uint8) Row { r.PC, r.Flags = pc, flags; return r }
	base := func() *Table {
		return rows(at(0x100, rsp8, 0), at(0x110, rsp16, 0), at(0x120, Row{}, 0))
	}
	W, A := FlagWrapper, FlagAnon
	tests := []struct {
		name  string
		marks [][3]uint64 // start, end, flag
		want  []Row
	}{
		{"exact rows", [][3]uint64{{0x100, 0x120, uint64(W)}},
			[]Row{at(0x100, rsp8, W), at(0x110, rsp16, W), at(0x120, Row{}, 0)}},
		{"split inside", [][3]uint64{{0x104, 0x114, uint64(W)}},
			[]Row{at(0x100, rsp8, 0), at(0x104, rsp8, W), at(0x110, rsp16, W), at(0x114, rsp16, 0), at(0x120, Row{}, 0)}},
		{"before the table", [][3]uint64{{0x80, 0x108, uint64(A)}},
			[]Row{at(0x80, Row{}, A), at(0x100, rsp8, A), at(0x108, rsp8, 0), at(0x110, rsp16, 0), at(0x120, Row{}, 0)}},
		{"past the end", [][3]uint64{{0x118, 0x200, uint64(A)}},
			[]Row{at(0x100, rsp8, 0), at(0x110, rsp16, 0), at(0x118, rsp16, A), at(0x120, Row{}, A), at(0x200, Row{}, 0)}},
		{"adjacent marks merge", [][3]uint64{{0x104, 0x108, uint64(W)}, {0x108, 0x10c, uint64(W)}},
			[]Row{at(0x100, rsp8, 0), at(0x104, rsp8, W), at(0x10c, rsp8, 0), at(0x110, rsp16, 0), at(0x120, Row{}, 0)}},
		{"two flags", [][3]uint64{{0x100, 0x110, uint64(W)}, {0x108, 0x118, uint64(A)}},
			[]Row{at(0x100, rsp8, W), at(0x108, rsp8, W|A), at(0x110, rsp16, A), at(0x118, rsp16, 0), at(0x120, Row{}, 0)}},
		{"ending before the table", [][3]uint64{{0x80, 0x90, uint64(A)}},
			[]Row{at(0x80, Row{}, A), at(0x90, Row{}, 0), at(0x100, rsp8, 0), at(0x110, rsp16, 0), at(0x120, Row{}, 0)}},
		{"rows that differed by the flag merge", [][3]uint64{{0x104, 0x108, uint64(W)}, {0x100, 0x110, uint64(W)}},
			[]Row{at(0x100, rsp8, W), at(0x110, rsp16, 0), at(0x120, Row{}, 0)}},
		{"empty range", [][3]uint64{{0x108, 0x108, uint64(W)}, {0x10c, 0x104, uint64(W)}}, base().Rows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := base()
			orig := tab.Clone()
			c := tab.Clone()
			var spans []Span
			for _, m := range tt.marks {
				c.Mark(m[0], m[1], uint8(m[2]))
				spans = append(spans, Span{m[0], m[1], uint8(m[2])})
			}
			if !reflect.DeepEqual(c.Rows, tt.want) {
				t.Errorf("Mark one by one: got  %v\nwant %v", c.Rows, tt.want)
			}
			all := tab.Clone()
			all.MarkAll(spans)
			if !reflect.DeepEqual(all.Rows, tt.want) {
				t.Errorf("MarkAll: got  %v\nwant %v", all.Rows, tt.want)
			}
			if !reflect.DeepEqual(tab.Rows, orig.Rows) {
				t.Errorf("Mark on a clone changed the original: %v", tab.Rows)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	tab := rows(
		Row{PC: 0x1000, Kind: KindRSP, CFAOffset: 8},
		Row{PC: 0x1001, Kind: KindRBP, CFAOffset: 16, RBPSaved: true, RBPOffset: -16, Flags: FlagWrapper},
		Row{PC: 0x1010, Kind: KindPLT, CFAOffset: 11, Flags: FlagAnon},
		Row{PC: 0x1020, Kind: KindDerefRBP, CFAOffset: -16},
		Row{PC: 0xffffffff, Kind: KindEnd},
	)
	got, err := tab.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x00, 0x10, 0, 0, 8, 0, 1, 0,
		0x01, 0x10, 0, 0, 16, 0, 2 | 8 | 0x80, 0xfe,
		0x10, 0x10, 0, 0, 11, 0, 3 | 0x40, 0,
		0x20, 0x10, 0, 0, 0xf0, 0xff, 4, 0,
		0xff, 0xff, 0xff, 0xff, 0, 0, 6, 0,
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got  % x\nwant % x", got, want)
	}
	back, err := Decode(got)
	if err != nil || !reflect.DeepEqual(back, tab) {
		t.Errorf("Decode(Encode) = %v, %v; want %v", back, err, tab.Rows)
	}
	for _, bad := range []Row{
		{PC: 1 << 32, Kind: KindRSP, CFAOffset: 8},
		{Kind: KindRSP, CFAOffset: 40000},
		{Kind: KindRSP, CFAOffset: -40000},
		{Kind: KindRSP, CFAOffset: 8, RBPSaved: true, RBPOffset: -12},
		{Kind: KindRSP, CFAOffset: 8, RBPSaved: true, RBPOffset: -1032},
		{Kind: 7},
		{Kind: KindRSP, Flags: 1},
	} {
		if _, err := rows(bad).Encode(); err == nil {
			t.Errorf("Encode(%v): no error", bad)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, b := range [][]byte{
		{1, 2, 3},
		{0, 0, 0, 0, 0, 0, 7, 0},                         // kind 7
		{0, 0, 0, 0, 0, 0, 0x11, 0},                      // bit 4
		{0, 0, 0, 0, 0, 0, 1, 3},                         // rbp offset without RBPSaved
		{8, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0, 2, 0}, // PCs not increasing
	} {
		if _, err := Decode(b); err == nil {
			t.Errorf("Decode(% x): no error", b)
		}
	}
}

// TestEncodeReal: Build's tables of real files always encode.
func TestEncodeReal(t *testing.T) {
	for _, file := range []string{libc, libstdcxx, libsqlite} {
		needFile(t, file)
		tab := buildFile(t, file)
		b, err := tab.Encode()
		if err != nil {
			t.Errorf("%s: %v", file, err)
		}
		if back, err := Decode(b); err != nil || !reflect.DeepEqual(back, tab) {
			t.Errorf("%s: Decode(Encode) differs: %v", file, err)
		}
	}
}

// FramePointer gives code without CFI the rule of a frame-pointer frame,
// and leaves rows that have a rule alone.
func TestFramePointer(t *testing.T) {
	tab := &Table{Rows: []Row{
		{PC: 0x100, Kind: KindRSP, CFAOffset: 8},
		{PC: 0x110, Kind: KindUndefined},
		{PC: 0x200, Kind: KindRSP, CFAOffset: 16},
	}}
	tab.FramePointer([][2]uint64{{0x40, 0x50}, {0x50, 0x60}, {0x108, 0x180}, {0x190, 0x200}, {0x300, 0x310}})
	fp := Row{Kind: KindRBP, CFAOffset: 16, RBPSaved: true, RBPOffset: -16}
	want := []Row{
		withPC(fp, 0x40), // before the first row: no rule; two adjacent ranges
		{PC: 0x60, Kind: KindUndefined},
		{PC: 0x100, Kind: KindRSP, CFAOffset: 8}, // has a rule: kept
		withPC(fp, 0x110),
		{PC: 0x180, Kind: KindUndefined},
		withPC(fp, 0x190), // up to the next row, which has a rule
		{PC: 0x200, Kind: KindRSP, CFAOffset: 16},
	}
	if !reflect.DeepEqual(tab.Rows, want) {
		t.Errorf("rows\n%v\nwant\n%v", tab.Rows, want)
	}
	// A flag on a row without a rule stays on the rule given to it.
	tab = &Table{Rows: []Row{{PC: 0x10, Kind: KindUndefined, Flags: FlagWrapper}, {PC: 0x40, Kind: KindRSP, CFAOffset: 8}}}
	tab.FramePointer([][2]uint64{{0x20, 0x30}})
	marked := withPC(fp, 0x20)
	marked.Flags = FlagWrapper
	want = []Row{{PC: 0x10, Kind: KindUndefined, Flags: FlagWrapper}, marked, {PC: 0x30, Kind: KindUndefined, Flags: FlagWrapper}, {PC: 0x40, Kind: KindRSP, CFAOffset: 8}}
	if !reflect.DeepEqual(tab.Rows, want) {
		t.Errorf("rows\n%v\nwant\n%v", tab.Rows, want)
	}
}

func withPC(r Row, pc uint64) Row {
	r.PC = pc
	return r
}
