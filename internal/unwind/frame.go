package unwind

import (
	"errors"
	"fmt"
)

// ErrMalformed wraps every error about the structure of a frame section
// (lengths, CIE pointers, truncated entries), so that callers can tell bad
// input from I/O errors.
var ErrMalformed = errors.New("malformed call frame information")

// frameSection is one .eh_frame or .debug_frame section with what its
// pointer encodings may be relative to.
type frameSection struct {
	data     []byte
	addr     uint64 // sh_addr: the base of pc-relative pointers in .eh_frame
	eh       bool   // .eh_frame layout (CIE id 0, relative CIE pointers, augmentations)
	textAddr uint64 // base of DW_EH_PE_textrel pointers
	dataAddr uint64 // base of DW_EH_PE_datarel pointers (.got on x86-64)
	hasData  bool
}

// cie is a parsed Common Information Entry.
type cie struct {
	codeAlign uint64
	dataAlign int64
	raReg     uint64
	fdeEnc    uint8 // DW_EH_PE_* of the FDE's pc_begin/pc_range
	lsdaEnc   uint8
	hasAugLen bool // 'z': FDEs carry an augmentation data length
	signal    bool // 'S': FDEs of this CIE describe signal trampolines
	addrSize  int
	initial   []byte // initial instructions
}

// fde is a parsed Frame Description Entry: its PC range and program.
type fde struct {
	cie        *cie
	start, end uint64
	insns      []byte
}

// Pointer encodings (DW_EH_PE_*), from the LSB Core specification.
const (
	peAbsptr  = 0x00
	peUleb128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSleb128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c

	pePcrel   = 0x10
	peTextrel = 0x20
	peDatarel = 0x30
	peFuncrel = 0x40
	peAligned = 0x50

	peIndirect = 0x80
	peOmit     = 0xff
)

// parseFrames splits a frame section into FDEs. Structural errors (an entry
// running past the section, a CIE pointer that does not lead to a CIE) fail
// the whole section, since nothing after them can be trusted. An FDE whose
// CIE is well-formed but unsupported (unknown version or augmentation) is
// skipped: its range then gets no rows, and the gap rows around it keep it
// from inheriting a neighbour's rule.
//
// Each FDE goes to visit as it is parsed, so that a large section needs no
// slice of all its FDEs.
func parseFrames(sec frameSection, visit func(fde)) error {
	cies := map[int]*cie{}
	cieErrs := map[int]error{}
	off := 0
	for off < len(sec.data) {
		ent, next, err := splitEntry(sec, off)
		if err != nil {
			return fmt.Errorf("%w: entry at %#x: %v", ErrMalformed, off, err)
		}
		if ent.terminator {
			break
		}
		if ent.isCIE {
			off = next
			continue
		}
		c, ok := cies[ent.cieOff]
		if !ok {
			if cerr, seen := cieErrs[ent.cieOff]; seen {
				err = cerr
			} else {
				c, err = parseCIEAt(sec, ent.cieOff)
			}
			if err != nil {
				if errors.Is(err, errUnsupported) {
					cieErrs[ent.cieOff] = err
					off = next
					continue
				}
				return fmt.Errorf("%w: FDE at %#x: CIE at %#x: %v", ErrMalformed, off, ent.cieOff, err)
			}
			cies[ent.cieOff] = c
		}
		f, err := parseFDE(sec, c, ent)
		if err != nil {
			if errors.Is(err, errUnsupported) {
				off = next
				continue
			}
			return fmt.Errorf("%w: FDE at %#x: %v", ErrMalformed, off, err)
		}
		if f.end > f.start {
			visit(f)
		}
		off = next
	}
	return nil
}

// errUnsupported marks well-formed input this package cannot interpret.
var errUnsupported = errors.New("unsupported")

// entry is the framing of one CIE or FDE.
type entry struct {
	terminator bool
	isCIE      bool
	cieOff     int    // FDE: section offset of its CIE
	body       []byte // after the CIE id / CIE pointer
	bodyOff    int    // section offset of body
	offSize    int    // 4 or 8 (64-bit DWARF)
}

// splitEntry reads the length and id of the entry at off and returns it with
// the offset of the next entry.
func splitEntry(sec frameSection, off int) (entry, int, error) {
	r := reader{buf: sec.data, off: off}
	length := uint64(r.u32())
	if r.err != nil {
		return entry{}, 0, r.err
	}
	if length == 0 {
		// .eh_frame ends with a zero terminator; crtend.o supplies it.
		return entry{terminator: true}, len(sec.data), nil
	}
	offSize := 4
	if length == 0xffffffff {
		offSize = 8
		length = r.u64()
		if r.err != nil {
			return entry{}, 0, r.err
		}
	} else if length >= 0xfffffff0 {
		return entry{}, 0, fmt.Errorf("reserved length %#x", length)
	}
	start := r.off
	if length > uint64(len(sec.data)-start) {
		return entry{}, 0, fmt.Errorf("length %#x runs past the section end", length)
	}
	next := start + int(length)
	body := reader{buf: sec.data[:next], off: start}
	idOff := body.off
	var id uint64
	if offSize == 8 {
		id = body.u64()
	} else {
		id = uint64(body.u32())
	}
	if body.err != nil {
		return entry{}, 0, fmt.Errorf("entry too short for its CIE id")
	}
	e := entry{offSize: offSize, body: sec.data[body.off:next], bodyOff: body.off}
	switch {
	case sec.eh && id == 0:
		e.isCIE = true
	case sec.eh:
		// .eh_frame: the id is the distance back from the id field to the CIE.
		if id > uint64(idOff) {
			return entry{}, 0, fmt.Errorf("CIE pointer %#x points before the section", id)
		}
		e.cieOff = idOff - int(id)
	case offSize == 4 && id == 0xffffffff, offSize == 8 && id == ^uint64(0):
		e.isCIE = true
	default:
		// .debug_frame: the id is the CIE's offset in the section.
		if id >= uint64(len(sec.data)) {
			return entry{}, 0, fmt.Errorf("CIE pointer %#x points past the section", id)
		}
		e.cieOff = int(id)
	}
	return e, next, nil
}

// parseCIEAt parses the CIE at section offset off.
func parseCIEAt(sec frameSection, off int) (*cie, error) {
	ent, _, err := splitEntry(sec, off)
	if err != nil {
		return nil, err
	}
	if ent.terminator || !ent.isCIE {
		return nil, errors.New("not a CIE")
	}
	r := reader{buf: ent.body}
	c := &cie{addrSize: 8, fdeEnc: peAbsptr, lsdaEnc: peOmit}
	version := r.u8()
	aug := r.cstring()
	if r.err != nil {
		return nil, r.err
	}
	switch version {
	case 1, 3, 4:
	default:
		return nil, fmt.Errorf("%w CIE version %d", errUnsupported, version)
	}
	if aug == "eh" {
		// Old GCC: a pointer to exception data follows; no other meaning.
		r.take(8)
		aug = ""
	}
	if version == 4 {
		c.addrSize = int(r.u8())
		if seg := r.u8(); seg != 0 {
			return nil, fmt.Errorf("%w segment selector size %d", errUnsupported, seg)
		}
		if c.addrSize != 4 && c.addrSize != 8 {
			return nil, fmt.Errorf("%w address size %d", errUnsupported, c.addrSize)
		}
	}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		c.raReg = uint64(r.u8())
	} else {
		c.raReg = r.uleb()
	}
	if r.err != nil {
		return nil, r.err
	}
	if aug != "" {
		if aug[0] != 'z' {
			return nil, fmt.Errorf("%w augmentation %q", errUnsupported, aug)
		}
		c.hasAugLen = true
		n := r.uleb()
		if r.err != nil {
			return nil, r.err
		}
		if n > uint64(len(r.buf)-r.off) {
			return nil, fmt.Errorf("augmentation data length %d runs past the CIE", n)
		}
		augData := reader{buf: r.take(int(n))}
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.fdeEnc = augData.u8()
			case 'L':
				c.lsdaEnc = augData.u8()
			case 'P':
				enc := augData.u8()
				// The personality routine's address is not needed for
				// unwinding; read it only to step over it.
				readPointer(&augData, sec, enc, c.addrSize, ent.bodyOff+r.off-int(n)+augData.off, true)
			case 'S':
				c.signal = true
			case 'B', 'G':
				// AArch64 BTI / MTE markers: no data, no effect on unwinding.
			default:
				// The data of an unknown letter has an unknown size, so
				// the letters after it cannot be read.
				return nil, fmt.Errorf("%w augmentation %q", errUnsupported, aug)
			}
		}
		if augData.err != nil {
			return nil, fmt.Errorf("augmentation data: %w", augData.err)
		}
	}
	if c.codeAlign == 0 {
		return nil, errors.New("code alignment factor 0")
	}
	c.initial = r.buf[r.off:]
	return c, nil
}

// parseFDE reads an FDE's PC range and instructions.
func parseFDE(sec frameSection, c *cie, ent entry) (fde, error) {
	r := reader{buf: ent.body}
	enc := c.fdeEnc
	if !sec.eh && !c.hasAugLen {
		enc = peAbsptr
	}
	if enc == peOmit {
		return fde{}, fmt.Errorf("%w omitted FDE address", errUnsupported)
	}
	start, err := readPointer(&r, sec, enc, c.addrSize, ent.bodyOff, false)
	if err != nil {
		return fde{}, err
	}
	// The range has the format of the start's encoding but no base.
	rng, err := readPointer(&r, sec, enc&0x0f, c.addrSize, ent.bodyOff+r.off, false)
	if err != nil {
		return fde{}, err
	}
	if c.hasAugLen {
		n := r.uleb()
		if r.err != nil {
			return fde{}, r.err
		}
		r.take(int(min(n, uint64(len(r.buf)+1))))
	}
	if r.err != nil {
		return fde{}, r.err
	}
	end := start + rng
	if end < start {
		return fde{}, fmt.Errorf("range %#x+%#x overflows", start, rng)
	}
	return fde{cie: c, start: start, end: end, insns: r.buf[r.off:]}, nil
}

// readPointer reads a pointer in encoding enc at r; fieldOff is the section
// offset of the field (the base of pc-relative pointers). skipOnly reads a
// pointer whose value is not used (a personality routine): indirect is
// then fine, since nothing is dereferenced.
func readPointer(r *reader, sec frameSection, enc uint8, addrSize int, fieldOff int, skipOnly bool) (uint64, error) {
	if enc == peOmit {
		return 0, nil
	}
	if enc&0x70 == peAligned {
		a := uint64(addrSize)
		pad := int((a - (sec.addr+uint64(fieldOff))%a) % a)
		r.take(pad)
		fieldOff += pad
	}
	var v uint64
	switch enc & 0x0f {
	case peAbsptr:
		if addrSize == 4 {
			v = uint64(r.u32())
		} else {
			v = r.u64()
		}
	case peUleb128:
		v = r.uleb()
	case peUdata2:
		v = uint64(r.u16())
	case peUdata4:
		v = uint64(r.u32())
	case peUdata8:
		v = r.u64()
	case peSleb128:
		v = uint64(r.sleb())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	case peSdata8:
		v = r.u64()
	default:
		return 0, fmt.Errorf("%w pointer encoding %#x", errUnsupported, enc)
	}
	if r.err != nil {
		return 0, r.err
	}
	switch enc & 0x70 {
	case 0, peAligned:
	case pePcrel:
		if !sec.eh {
			return 0, fmt.Errorf("%w pc-relative pointer in .debug_frame", errUnsupported)
		}
		v += sec.addr + uint64(fieldOff)
	case peTextrel:
		v += sec.textAddr
	case peDatarel:
		if !sec.hasData {
			return 0, fmt.Errorf("%w data-relative pointer without .got", errUnsupported)
		}
		v += sec.dataAddr
	case peFuncrel:
		return 0, fmt.Errorf("%w function-relative pointer", errUnsupported)
	default:
		return 0, fmt.Errorf("%w pointer encoding %#x", errUnsupported, enc)
	}
	if enc&peIndirect != 0 && !skipOnly {
		// The value would be loaded from memory at run time; a PC range
		// is never encoded this way by real toolchains.
		return 0, fmt.Errorf("%w indirect PC pointer", errUnsupported)
	}
	return v, nil
}
