package symbolize

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkLineHeader vets the line program header at off in .debug_line
// before debug/dwarf reads it. A DWARF 5 header gives its directory and
// file counts up front, and debug/dwarf allocates that many entries before
// reading any: a hostile count makes an allocation so large that the
// runtime dies of it, which no recover can catch. A count is accepted when
// it is at most the bytes left in the unit, since every real entry holds at
// least one byte of path.
//
// The walk over the entries mirrors debug/dwarf's reading of the forms it
// knows (unknown ones take no bytes) so the file count is read where it will.
func checkLineHeader(sec []byte, off int64, order binary.ByteOrder) error {
	if off < 0 || off > int64(len(sec)) {
		return errors.New("line program offset out of range")
	}
	c := &cursor{b: sec[off:], order: order}
	length, dwarf64 := c.unitLength()
	if c.err != nil {
		return c.err
	}
	if length > uint64(len(c.b)) {
		return fmt.Errorf("line program length %d exceeds section", length)
	}
	c.b = c.b[:length]
	if version := c.u16(); version < 5 {
		return c.err // older headers list entries without counts
	}
	c.skip(2) // address and segment selector sizes
	if dwarf64 {
		c.skip(8)
	} else {
		c.skip(4) // header length
	}
	c.skip(5) // min inst length, max ops, default is_stmt, line base, line range
	opcodeBase := c.u8()
	if opcodeBase > 0 {
		c.skip(int(opcodeBase) - 1)
	}
	for _, what := range []string{"directory", "file"} {
		forms := c.formats()
		count := c.uleb()
		if c.err != nil {
			return c.err
		}
		if count > uint64(len(c.b)) {
			return fmt.Errorf("line program %s count %d exceeds its %d bytes", what, count, len(c.b))
		}
		for i := uint64(0); i < count && c.err == nil; i++ {
			for _, f := range forms {
				c.skipForm(f, dwarf64)
			}
		}
	}
	return c.err
}

// cursor reads DWARF encodings from b, remembering the first error.
type cursor struct {
	b     []byte
	order binary.ByteOrder
	err   error
}

var errShortLineHeader = errors.New("line program header truncated")

func (c *cursor) take(n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.b) {
		c.err = errShortLineHeader
		c.b = nil
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) skip(n int) { c.take(n) }

func (c *cursor) u8() uint8 {
	if v := c.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (c *cursor) u16() uint16 {
	if v := c.take(2); v != nil {
		return c.order.Uint16(v)
	}
	return 0
}

func (c *cursor) u32() uint32 {
	if v := c.take(4); v != nil {
		return c.order.Uint32(v)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if v := c.take(8); v != nil {
		return c.order.Uint64(v)
	}
	return 0
}

func (c *cursor) uleb() uint64 {
	var v uint64
	for shift := uint(0); c.err == nil; shift += 7 {
		b := c.u8()
		if shift < 64 {
			v |= uint64(b&0x7f) << shift
		}
		if b&0x80 == 0 {
			break
		}
	}
	return v
}

// unitLength reads an initial length: 32 bits, or 0xffffffff and 64 bits.
func (c *cursor) unitLength() (uint64, bool) {
	n := c.u32()
	switch {
	case n == 0xffffffff:
		return c.u64(), true
	case n >= 0xfffffff0:
		c.err = errors.New("line program length has a reserved value")
	}
	return uint64(n), false
}

// formats reads an entry format list and returns its forms.
func (c *cursor) formats() []uint64 {
	n := c.u8()
	forms := make([]uint64, 0, n)
	for i := 0; i < int(n) && c.err == nil; i++ {
		c.uleb() // content type
		forms = append(forms, c.uleb())
	}
	return forms
}

// DWARF 5 form codes that line program headers use.
const (
	formData2    = 0x05
	formData4    = 0x06
	formData8    = 0x07
	formString   = 0x08
	formBlock    = 0x09
	formData1    = 0x0b
	formStrp     = 0x0e
	formUdata    = 0x0f
	formStrx     = 0x1a
	formStrpSup  = 0x1d
	formData16   = 0x1e
	formLineStrp = 0x1f
	formStrx1    = 0x25
	formStrx2    = 0x26
	formStrx3    = 0x27
	formStrx4    = 0x28
)

func (c *cursor) skipForm(form uint64, dwarf64 bool) {
	switch form {
	case formString:
		for c.err == nil && c.u8() != 0 {
		}
	case formStrp, formLineStrp, formStrpSup:
		if dwarf64 {
			c.skip(8)
		} else {
			c.skip(4)
		}
	case formStrx, formUdata:
		c.uleb()
	case formStrx1, formData1:
		c.skip(1)
	case formStrx2, formData2:
		c.skip(2)
	case formStrx3:
		c.skip(3)
	case formStrx4, formData4:
		c.skip(4)
	case formData8:
		c.skip(8)
	case formData16:
		c.skip(16)
	case formBlock:
		n := c.uleb()
		if n > uint64(len(c.b)) {
			c.err = errShortLineHeader
			return
		}
		c.skip(int(n))
	}
}
