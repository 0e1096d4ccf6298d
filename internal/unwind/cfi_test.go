package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// Hand-assembled call frame information for the edge cases real toolchains
// rarely produce.

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		done := (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0)
		if !done {
			c |= 0x80
		}
		b = append(b, c)
		if done {
			return b
		}
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// CFA instructions.
var (
	defCFA       = func(reg, off uint64) []byte { return cat([]byte{cfaDefCFA}, uleb(reg), uleb(off)) }
	defCFAOffset = func(off uint64) []byte { return cat([]byte{cfaDefCFAOffset}, uleb(off)) }
	offset       = func(reg uint8, factored uint64) []byte { return cat([]byte{cfaOffset | reg}, uleb(factored)) }
	adv          = func(d uint8) []byte { return []byte{cfaAdvanceLoc | d} }
	// The x86-64 CIE's initial state: CFA = rsp+8, return address at CFA-8.
	x86Initial = cat(defCFA(regRSP, 8), offset(regRIP, 1))
)

// frames assembles a frame section at addr: .eh_frame layout by default,
// .debug_frame with debug; 64-bit DWARF lengths with dwarf64.
type frames struct {
	addr    uint64
	debug   bool
	dwarf64 bool
	buf     []byte
}

// entry appends one CIE or FDE; id(off) gives the id field's value from
// the offset of the id field. It returns the entry's offset.
func (f *frames) entry(id func(idOff int) uint64, body func(bodyOff int) []byte) int {
	off := len(f.buf)
	hdr := 4
	if f.dwarf64 {
		hdr = 12
	}
	idOff := off + hdr
	idSize := 4
	if f.dwarf64 {
		idSize = 8
	}
	b := body(idOff + idSize)
	length := uint64(idSize + len(b))
	if f.dwarf64 {
		f.buf = append(f.buf, u32(0xffffffff)...)
		f.buf = append(f.buf, u64(length)...)
		f.buf = append(f.buf, u64(id(idOff))...)
	} else {
		f.buf = append(f.buf, u32(uint32(length))...)
		f.buf = append(f.buf, u32(uint32(id(idOff)))...)
	}
	f.buf = append(f.buf, b...)
	return off
}

// cie appends a version 1 CIE (code align 1, data align -8, ra 16).
func (f *frames) cie(aug string, augData []byte, insns ...[]byte) int {
	return f.cieWith(1, aug, augData, 1, -8, insns...)
}

func (f *frames) cieWith(version uint8, aug string, augData []byte, codeAlign uint64, dataAlign int64, insns ...[]byte) int {
	return f.entry(func(int) uint64 {
		if f.debug {
			return ^uint64(0)
		}
		return 0
	}, func(int) []byte {
		b := cat([]byte{version}, []byte(aug), []byte{0})
		if version == 4 {
			b = append(b, 8, 0)
		}
		b = cat(b, uleb(codeAlign), sleb(dataAlign))
		if version == 1 {
			b = append(b, regRIP)
		} else {
			b = append(b, uleb(regRIP)...)
		}
		if len(aug) > 0 && aug[0] == 'z' {
			b = cat(b, uleb(uint64(len(augData))), augData)
		}
		return cat(b, cat(insns...))
	})
}

// fde appends an FDE for [start, start+size) with pointers written by
// enc (pc-relative sdata4 in .eh_frame by default: the CIE's 'R' must
// match), augmentation data augData (nil: no 'z').
func (f *frames) fde(cieOff int, start, size uint64, enc uint8, augData []byte, insns ...[]byte) int {
	return f.entry(func(idOff int) uint64 {
		if f.debug {
			return uint64(cieOff)
		}
		return uint64(idOff - cieOff)
	}, func(bodyOff int) []byte {
		ptr := func(v uint64, fieldOff int, enc uint8) []byte {
			if enc&0x70 == pePcrel {
				v -= f.addr + uint64(fieldOff)
			}
			switch enc & 0x0f {
			case peAbsptr, peUdata8, peSdata8:
				return u64(v)
			case peUdata4, peSdata4:
				return u32(uint32(v))
			case peUdata2, peSdata2:
				return u16(uint16(v))
			case peUleb128:
				return uleb(v)
			case peSleb128:
				return sleb(int64(v))
			}
			panic("encoding")
		}
		b := ptr(start, bodyOff, enc)
		b = append(b, ptr(size, bodyOff+len(b), enc&0x0f)...)
		if augData != nil {
			b = cat(b, uleb(uint64(len(augData))), augData)
		}
		return cat(b, cat(insns...))
	})
}

// ehFDE is the common case: an .eh_frame FDE, pc-relative sdata4, 'z'.
func (f *frames) ehFDE(cieOff int, start, size uint64, insns ...[]byte) int {
	return f.fde(cieOff, start, size, pePcrel|peSdata4, []byte{}, insns...)
}

func (f *frames) section() frameSection {
	return frameSection{data: f.buf, addr: f.addr, eh: !f.debug, textAddr: 0x1000, dataAddr: 0x8000, hasData: true}
}

// tableOf builds the table of one section as Build would.
func tableOf(sec frameSection) (*Table, error) {
	var b builder
	if err := b.addSection(sec); err != nil {
		return nil, err
	}
	return b.table(), nil
}

var zR = []byte{pePcrel | peSdata4}

// sigreturnCFI is glibc's CFI for __restore_rt, with the interrupted rsp
// at rsp+rspOff.
func sigreturnCFI(rspOff int64) []byte {
	breg7 := func(off int64) []byte { return cat([]byte{opBreg0 + regRSP}, sleb(off)) }
	block := func(e []byte) []byte { return cat(uleb(uint64(len(e))), e) }
	expr := func(reg uint8, off int64) []byte {
		return cat([]byte{cfaExpression}, uleb(uint64(reg)), block(breg7(off)))
	}
	return cat(
		[]byte{cfaDefCFAExpression}, block(cat(breg7(rspOff), []byte{opDeref})),
		expr(regRBP, SignalRBPOffset),
		expr(3, 128),
		expr(regRIP, SignalRIPOffset))
}

// frameCase is one hand-assembled section and the table it must give.
type frameCase struct {
	name  string
	build func(f *frames)
	debug bool
	want  []Row
	err   error // errors.Is target
}

func rsp(pc uint64, off int32) Row { return Row{PC: pc, Kind: KindRSP, CFAOffset: off} }
func undef(pc uint64) Row          { return Row{PC: pc} }

// section runs the case's builder.
func (c frameCase) section() frameSection {
	f := &frames{addr: 0x4000, debug: c.debug}
	c.build(f)
	return f.section()
}

// frameCases serve both TestFrameEdgeCases and the fuzz seed corpus.
var frameCases = []frameCase{
	{"basic", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x10, adv(1), defCFAOffset(16))
	}, false, []Row{rsp(0x1000, 8), rsp(0x1001, 16), undef(0x1010)}, nil},
	{"zero terminator ends the section", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x10)
		f.buf = append(f.buf, 0, 0, 0, 0, 0xde, 0xad)
	}, false, []Row{rsp(0x1000, 8), undef(0x1010)}, nil},
	{"64-bit DWARF lengths", func(f *frames) {
		f.dwarf64 = true
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x10, adv(4), defCFAOffset(24))
	}, false, []Row{rsp(0x1000, 8), rsp(0x1004, 24), undef(0x1010)}, nil},
	{"CIE pointer before the section", func(f *frames) {
		f.ehFDE(-100, 0x1000, 0x10)
	}, false, nil, ErrMalformed},
	{"CIE pointer at an FDE", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		d := f.ehFDE(c, 0x1000, 0x10)
		f.ehFDE(d, 0x2000, 0x10)
	}, false, nil, ErrMalformed},
	{"debug_frame CIE pointer past the end", func(f *frames) {
		f.fde(1<<20, 0x1000, 0x10, peAbsptr, nil)
	}, true, nil, ErrMalformed},
	{"length past the section", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x10)
		f.buf = f.buf[:len(f.buf)-2]
	}, false, nil, ErrMalformed},
	{"reserved length", func(f *frames) {
		f.buf = u32(0xfffffff5)
	}, false, nil, ErrMalformed},
	{"truncated CIE", func(f *frames) {
		c := f.entry(func(int) uint64 { return 0 }, func(int) []byte { return []byte{1, 'z', 'R', 0} })
		f.ehFDE(c, 0x1000, 0x10)
	}, false, nil, ErrMalformed},
	{"augmentations P L S", func(f *frames) {
		// Personality: indirect pc-relative sdata4; LSDA: pcrel sdata4.
		aug := cat([]byte{peIndirect | pePcrel | peSdata4}, u32(0x1234), []byte{pePcrel | peSdata4}, zR)
		c := f.cie("zPLRS", aug)
		// glibc's __restore_rt: registers in the ucontext at rsp.
		f.fde(c, 0x1000, 0x10, pePcrel|peSdata4, u32(0x99), sigreturnCFI(SignalRSPOffset))
	}, false, []Row{{PC: 0x1000, Kind: KindSignal}, undef(0x1010)}, nil},
	{"signal frame with other offsets", func(f *frames) {
		c := f.cie("zRS", zR)
		f.ehFDE(c, 0x1000, 0x10, sigreturnCFI(SignalRSPOffset+8))
	}, false, []Row{undef(0x1000)}, nil},
	{"unknown augmentation skips its FDEs", func(f *frames) {
		c := f.cie("zX", []byte{7}, x86Initial)
		f.ehFDE(c, 0x1000, 0x10)
		c2 := f.cie("zR", zR, x86Initial)
		f.ehFDE(c2, 0x2000, 0x10)
	}, false, []Row{rsp(0x2000, 8), undef(0x2010)}, nil},
	{"CIE version 2 skips its FDEs", func(f *frames) {
		c := f.cieWith(2, "zR", zR, 1, -8, x86Initial)
		f.ehFDE(c, 0x1000, 0x10)
	}, false, nil, nil},
	{"old eh augmentation", func(f *frames) {
		c := f.entry(func(int) uint64 { return 0 }, func(int) []byte {
			return cat([]byte{1, 'e', 'h', 0}, u64(0), uleb(1), sleb(-8), []byte{regRIP}, x86Initial)
		})
		f.fde(c, 0x1000, 0x10, peAbsptr, nil)
	}, false, []Row{rsp(0x1000, 8), undef(0x1010)}, nil},
	{"pointer encodings", func(f *frames) {
		for i, enc := range []uint8{peAbsptr, peUdata4, peSdata8, peUdata2, peUleb128, peSleb128, pePcrel | peSdata4, peTextrel | peUdata4, peDatarel | peSdata4} {
			c := f.cie("zR", []byte{enc}, x86Initial)
			start := uint64(0x1000 + 0x100*i)
			v := start
			switch enc & 0x70 {
			case peTextrel:
				v -= 0x1000
			case peDatarel:
				v -= 0x8000
			}
			f.fde(c, v, 0x10, enc, []byte{}, adv(uint8(i+1)), defCFAOffset(uint64(16+8*i)))
		}
	}, false, func() []Row {
		var r []Row
		for i := 0; i < 9; i++ {
			pc := uint64(0x1000 + 0x100*i)
			r = append(r, rsp(pc, 8), rsp(pc+uint64(i+1), int32(16+8*i)), undef(pc+0x10))
		}
		return r
	}(), nil},
	{"indirect PC is unsupported", func(f *frames) {
		c := f.cie("zR", []byte{peIndirect | peUdata4}, x86Initial)
		f.fde(c, 0x1000, 0x10, peUdata4, []byte{})
	}, false, nil, nil},
	{"advance_loc1/2/4 with code alignment 4", func(f *frames) {
		c := f.cieWith(3, "zR", zR, 4, -8, x86Initial)
		f.ehFDE(c, 0x1000, 0x100000,
			[]byte{cfaAdvanceLoc1, 2}, defCFAOffset(16),
			cat([]byte{cfaAdvanceLoc2}, u16(0x100)), defCFAOffset(24),
			cat([]byte{cfaAdvanceLoc4}, u32(0x10000)), defCFAOffset(32))
	}, false, []Row{rsp(0x1000, 8), rsp(0x1008, 16), rsp(0x1408, 24), rsp(0x41408, 32), undef(0x101000)}, nil},
	{"remember and restore state", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x40, adv(1), defCFAOffset(16), offset(regRBP, 2),
			adv(1), []byte{cfaRememberState}, defCFAOffset(8), []byte{cfaRestore | regRBP},
			adv(1), []byte{cfaRestoreState})
	}, false, []Row{rsp(0x1000, 8), {PC: 0x1001, Kind: KindRSP, CFAOffset: 16, RBPSaved: true, RBPOffset: -16},
		rsp(0x1002, 8), {PC: 0x1003, Kind: KindRSP, CFAOffset: 16, RBPSaved: true, RBPOffset: -16}, undef(0x1040)}, nil},
	{"restore_state without remember", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x40, adv(2), []byte{cfaRestoreState}, adv(2), defCFAOffset(16))
	}, false, []Row{rsp(0x1000, 8), undef(0x1002)}, nil},
	{"def_cfa_sf, offset_extended_sf, GNU_args_size, expressions skipped", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x40,
			adv(1), cat([]byte{cfaDefCFASf}, uleb(regRBP), sleb(-2)), // rbp + 16
			cat([]byte{cfaOffsetExtendedSf}, uleb(regRBP), sleb(2)), // rbp at cfa-16
			cat([]byte{cfaGNUArgsSize}, uleb(32)),
			cat([]byte{cfaExpression}, uleb(3), uleb(2), []byte{opBreg0 + regRBP, 0x78}),
			cat([]byte{cfaValExpression}, uleb(12), uleb(1), []byte{opLit0}),
			adv(3), cat([]byte{cfaDefCFAOffsetSf}, sleb(-3)))
	}, false, []Row{rsp(0x1000, 8), {PC: 0x1001, Kind: KindRBP, CFAOffset: 16, RBPSaved: true, RBPOffset: -16},
		{PC: 0x1004, Kind: KindRBP, CFAOffset: 24, RBPSaved: true, RBPOffset: -16}, undef(0x1040)}, nil},
	{"unrepresentable rules are undefined", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x40,
			adv(1), cat([]byte{cfaValOffset}, uleb(regRBP), uleb(2)), // rbp's value is CFA-16
			adv(1), []byte{cfaSameValue, regRBP},
			adv(1), cat([]byte{cfaRegister}, uleb(regRBP), uleb(3)), // rbp kept in rbx
			adv(1), []byte{cfaRestoreExtended, regRBP},
			adv(1), defCFA(10, 0), // CFA in r10
			adv(1), defCFA(regRSP, 40000),
			adv(1), defCFA(regRSP, 8), cat([]byte{cfaOffsetExtended}, uleb(regRIP), uleb(2)), // ra at CFA-16
			adv(1), offset(regRIP, 1), cat([]byte{cfaDefCFAExpression}, uleb(2), []byte{opBreg0 + regRSP, 8}),
			adv(1), defCFA(regRSP, 8), cat([]byte{cfaGNUNegOffsetExtended}, uleb(regRBP), uleb(2)), // rbp at cfa+16
			adv(1), []byte{cfaUndefined, regRBP},
			adv(1), []byte{cfaSameValue, regRBP},
			adv(1), []byte{0x3f}, // unknown opcode: no rule from here on
			adv(1), defCFAOffset(16))
	}, false, []Row{rsp(0x1000, 8), undef(0x1001), rsp(0x1002, 8), undef(0x1003), rsp(0x1004, 8), undef(0x1005),
		{PC: 0x1009, Kind: KindRSP, CFAOffset: 8, RBPSaved: true, RBPOffset: 16}, undef(0x100a), rsp(0x100b, 8), undef(0x100c)}, nil},
	{"undefined return address ends the stack", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x10, []byte{cfaUndefined, regRIP})
	}, false, []Row{{PC: 0x1000, Kind: KindEnd}, undef(0x1010)}, nil},
	{"set_loc", func(f *frames) {
		c := f.cie("zR", []byte{peUdata4}, x86Initial)
		f.fde(c, 0x1000, 0x20, peUdata4, []byte{}, cat([]byte{cfaSetLoc}, u32(0x1008)), defCFAOffset(16),
			cat([]byte{cfaSetLoc}, u32(0x1010)), defCFAOffset(24),
			cat([]byte{cfaSetLoc}, u32(0x100c)), defCFAOffset(32)) // backwards: no rule from 0x1010 on
	}, false, []Row{rsp(0x1000, 8), rsp(0x1008, 16), undef(0x1010)}, nil},
	{"rbp offset not a multiple of 8", func(f *frames) {
		c := f.cieWith(1, "zR", zR, 1, -4, defCFA(regRSP, 8), offset(regRIP, 2))
		f.ehFDE(c, 0x1000, 0x10, adv(1), offset(regRBP, 3))
	}, false, []Row{rsp(0x1000, 8), undef(0x1001)}, nil},
	{"return address column not rip", func(f *frames) {
		c := f.entry(func(int) uint64 { return 0 }, func(int) []byte {
			return cat([]byte{1, 'z', 'R', 0}, uleb(1), sleb(-8), []byte{17}, uleb(1), zR, defCFA(regRSP, 8), offset(17, 1))
		})
		f.ehFDE(c, 0x1000, 0x10)
	}, false, []Row{undef(0x1000)}, nil},
	{"empty and adjacent FDEs, overlaps", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0)
		f.ehFDE(c, 0x1000, 0x10, adv(1), defCFAOffset(16))
		f.ehFDE(c, 0x1010, 0x10, adv(1), defCFAOffset(24))
		f.ehFDE(c, 0x1018, 0x10, adv(1), defCFAOffset(32)) // overlaps the previous one
	}, false, []Row{rsp(0x1000, 8), rsp(0x1001, 16), rsp(0x1010, 8), rsp(0x1011, 24), rsp(0x1018, 8), rsp(0x1019, 32), undef(0x1028)}, nil},
	{"debug_frame: version 4, CIE after its FDE", func(f *frames) {
		// The FDE points at the offset the CIE will have.
		fdeLen := 4 + 4 + 8 + 8 + 3
		f.fde(fdeLen, 0x1000, 0x10, peAbsptr, nil, adv(1), defCFAOffset(16))
		if c := f.cieWith(4, "", nil, 1, -8, x86Initial); c != fdeLen {
			panic("CIE offset")
		}
	}, true, []Row{rsp(0x1000, 8), rsp(0x1001, 16), undef(0x1010)}, nil},
	{"PLT expression with any threshold", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		plt := func(n byte) []byte {
			e := []byte{opBreg0 + regRSP, 8, opBreg0 + regRIP, 0, opLit0 + 15, opAnd, opLit0 + n, opGe, opLit0 + 3, opShl, opPlus}
			return cat([]byte{cfaDefCFAExpression}, uleb(uint64(len(e))), e)
		}
		f.ehFDE(c, 0x1000, 0x10, plt(11))
		f.ehFDE(c, 0x1010, 0x10, plt(10))
		f.ehFDE(c, 0x1020, 0x10, plt(9), offset(regRBP, 2)) // PLT code never saves rbp
	}, false, []Row{{PC: 0x1000, Kind: KindPLT, CFAOffset: 11}, {PC: 0x1010, Kind: KindPLT, CFAOffset: 10}, undef(0x1020)}, nil},
	{"LEB128 overflow", func(f *frames) {
		c := f.cie("zR", zR, x86Initial)
		f.ehFDE(c, 0x1000, 0x10, []byte{cfaDefCFAOffset, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, adv(1))
	}, false, []Row{undef(0x1000)}, nil},
}

func TestFrameEdgeCases(t *testing.T) {
	for _, tt := range frameCases {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := tableOf(tt.section())
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tab.Rows, tt.want) && !(len(tab.Rows) == 0 && len(tt.want) == 0) {
				t.Errorf("got  %v\nwant %v", tab.Rows, tt.want)
			}
			checkInvariants(t, tab)
		})
	}
}

// checkInvariants: PCs strictly increasing, no two neighbours with one
// rule, every row encodable but for PCs above 32 bits.
func checkInvariants(t testing.TB, tab *Table) {
	t.Helper()
	for i, r := range tab.Rows {
		if i > 0 && r.PC <= tab.Rows[i-1].PC {
			t.Fatalf("row %d: PC %#x after %#x", i, r.PC, tab.Rows[i-1].PC)
		}
		if i > 0 && sameRule(r, tab.Rows[i-1]) {
			t.Fatalf("row %d repeats row %d: %v", i, i-1, r)
		}
		r.PC = 0
		if err := encodable(r); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
}

// minimalELF wraps a frame section in the smallest x86-64 ELF file that
// debug/elf opens: a header, a null section, the frame section and the
// section name table.
func minimalELF(name string, addr uint64, data []byte) []byte {
	shstr := cat([]byte{0}, []byte(name), []byte{0}, []byte(".shstrtab"), []byte{0})
	const ehdr, shdr = 64, 64
	dataOff := uint64(ehdr)
	strOff := dataOff + uint64(len(data))
	shOff := (strOff + uint64(len(shstr)) + 7) &^ 7
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	b.Write(make([]byte, 8))
	binary.Write(&b, le, uint16(elf.ET_DYN))
	binary.Write(&b, le, uint16(elf.EM_X86_64))
	binary.Write(&b, le, uint32(1))
	binary.Write(&b, le, uint64(0)) // entry
	binary.Write(&b, le, uint64(0)) // phoff
	binary.Write(&b, le, shOff)
	binary.Write(&b, le, uint32(0))
	binary.Write(&b, le, uint16(ehdr))
	binary.Write(&b, le, uint16(56))
	binary.Write(&b, le, uint16(0))
	binary.Write(&b, le, uint16(shdr))
	binary.Write(&b, le, uint16(3)) // shnum
	binary.Write(&b, le, uint16(2)) // shstrndx
	b.Write(data)
	b.Write(shstr)
	b.Write(make([]byte, shOff-uint64(b.Len())))
	section := func(nameOff uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64) {
		binary.Write(&b, le, nameOff)
		binary.Write(&b, le, uint32(typ))
		binary.Write(&b, le, uint64(flags))
		binary.Write(&b, le, addr)
		binary.Write(&b, le, off)
		binary.Write(&b, le, size)
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint64(8))
		binary.Write(&b, le, uint64(0))
	}
	section(0, elf.SHT_NULL, 0, 0, 0, 0)
	section(1, elf.SHT_PROGBITS, elf.SHF_ALLOC, addr, dataOff, uint64(len(data)))
	section(uint32(2+len(name)), elf.SHT_STRTAB, 0, 0, strOff, uint64(len(shstr)))
	return b.Bytes()
}

// TestBuildMinimalELF runs one hand-made section through Build.
func TestBuildMinimalELF(t *testing.T) {
	f := &frames{addr: 0x4000}
	c := f.cie("zR", zR, x86Initial)
	f.ehFDE(c, 0x1000, 0x10, adv(1), defCFAOffset(16))
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		ef, err := elf.NewFile(bytes.NewReader(minimalELF(name, f.addr, f.buf)))
		if err != nil {
			t.Fatal(err)
		}
		tab, err := Build(ef)
		if name == ".debug_frame" {
			// .eh_frame bytes in .debug_frame: CIE id 0 is an FDE pointer
			// to offset 0, itself: not a CIE.
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: err %v, want ErrMalformed", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := []Row{{PC: 0x1000, Kind: KindRSP, CFAOffset: 8}, {PC: 0x1001, Kind: KindRSP, CFAOffset: 16}, {PC: 0x1010}}
		if !reflect.DeepEqual(tab.Rows, want) {
			t.Errorf("got %v, want %v", tab.Rows, want)
		}
	}
	// The same bytes in an AArch64 file: rules of another machine.
	arm := minimalELF(".eh_frame", f.addr, f.buf)
	binary.LittleEndian.PutUint16(arm[18:], uint16(elf.EM_AARCH64))
	ef, err := elf.NewFile(bytes.NewReader(arm))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ef); !errors.Is(err, ErrUnsupportedMachine) {
		t.Errorf("AArch64: err %v, want ErrUnsupportedMachine", err)
	}
}
