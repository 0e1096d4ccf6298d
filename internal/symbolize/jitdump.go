package symbolize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The jitdump format (perf's tools/perf/Documentation/jitdump-specification.txt):
// a file header, then records, each with a 16-byte header (id, total size,
// timestamp). Only JIT_CODE_LOAD records name code: after their header come
// pid, tid (4 bytes each), vma, code address, code size, code index (8
// bytes each), the NUL-terminated name, then the code itself. The file is
// written in the writer's byte order, which the magic tells.

const (
	jitdumpMagic      = 0x4A695444 // "JiTD"
	jitdumpHeaderSize = 40
	jitRecordHeader   = 16
	jitCodeLoad       = 0
	jitCodeLoadFixed  = 40 // pid, tid, vma, code address, size, index
	// maxJITRecord bounds a record (code included): a larger one is no
	// jitdump.
	maxJITRecord = 256 << 20
)

// ErrJITDump is returned for a file that is not a jitdump.
var ErrJITDump = errors.New("not a jitdump file")

// JITDump reads a jitdump file as it grows: Next parses the records that
// are complete now, from where the last call stopped.
type JITDump struct {
	order binary.ByteOrder // nil until the header is read
	off   int64            // the next record's offset
}

// Next parses the complete records of r (size bytes long now) after those
// already read and returns their code loads. A record still being written
// (size ends inside it) is read by a later call. A file that is no jitdump
// or a corrupt record gives an error wrapping ErrJITDump; symbols parsed
// before it are returned with it.
func (d *JITDump) Next(r io.ReaderAt, size int64) ([]JITSymbol, error) {
	if d.order == nil {
		if size < jitdumpHeaderSize {
			return nil, nil
		}
		var h [jitdumpHeaderSize]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return nil, fmt.Errorf("read jitdump header: %w", err)
		}
		switch {
		case binary.LittleEndian.Uint32(h[:]) == jitdumpMagic:
			d.order = binary.LittleEndian
		case binary.BigEndian.Uint32(h[:]) == jitdumpMagic:
			d.order = binary.BigEndian
		default:
			return nil, fmt.Errorf("magic %#x: %w", binary.LittleEndian.Uint32(h[:]), ErrJITDump)
		}
		hs := d.order.Uint32(h[8:])
		if hs < jitdumpHeaderSize || hs > 1<<20 {
			d.order = nil
			return nil, fmt.Errorf("header size %d: %w", hs, ErrJITDump)
		}
		d.off = int64(hs)
	}
	var syms []JITSymbol
	var rh [jitRecordHeader]byte
	for d.off+jitRecordHeader <= size {
		if _, err := r.ReadAt(rh[:], d.off); err != nil {
			return syms, fmt.Errorf("read jitdump record at %d: %w", d.off, err)
		}
		id, total := d.order.Uint32(rh[:]), int64(d.order.Uint32(rh[4:]))
		if total < jitRecordHeader || total > maxJITRecord {
			return syms, fmt.Errorf("record at %d: size %d: %w", d.off, total, ErrJITDump)
		}
		if d.off+total > size {
			break // still being written
		}
		if id == jitCodeLoad {
			s, err := d.codeLoad(r, d.off+jitRecordHeader, total-jitRecordHeader)
			if err != nil {
				return syms, fmt.Errorf("record at %d: %w", d.off, err)
			}
			if s.Size > 0 {
				syms = append(syms, s)
			}
		}
		d.off += total
	}
	return syms, nil
}

// codeLoad reads a JIT_CODE_LOAD record's body (n bytes at off).
func (d *JITDump) codeLoad(r io.ReaderAt, off, n int64) (JITSymbol, error) {
	if n < jitCodeLoadFixed+1 {
		return JITSymbol{}, fmt.Errorf("code load of %d bytes: %w", n, ErrJITDump)
	}
	b := make([]byte, min(n, jitCodeLoadFixed+maxJITName+1))
	if _, err := r.ReadAt(b, off); err != nil {
		return JITSymbol{}, fmt.Errorf("read code load: %w", err)
	}
	addr, size := d.order.Uint64(b[16:]), d.order.Uint64(b[24:])
	if addr+size < addr || size > uint64(n) {
		return JITSymbol{}, fmt.Errorf("code at %#x of %d bytes: %w", addr, size, ErrJITDump)
	}
	name := b[jitCodeLoadFixed:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if len(name) == 0 {
		return JITSymbol{}, nil // nothing to name it by
	}
	return JITSymbol{Start: addr, Size: size, Name: jitName(name)}, nil
}
