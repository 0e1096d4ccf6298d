package python

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// PyTypeObject's tp_members (a PyMemberDef array), from the type's start.
const tpMembers = 240

// pyMemberDef is one entry of a tp_members array, x86-64: name, int type,
// Py_ssize_t offset, int flags, doc.
const pyMemberDefSize = 40

// rRelative is R_X86_64_RELATIVE: a pointer the dynamic loader sets to the
// load address plus its addend.
const rRelative = 8

// memberNames are the code object's members the layout names, by
// PyCode_Type's member name (3.10 has no co_qualname).
func (c Code) memberNames() map[string]uint32 {
	return map[string]uint32{"co_filename": c.Filename, "co_name": c.Name, "co_qualname": c.Qualname,
		"co_firstlineno": c.FirstLine, "co_linetable": c.Linetable}
}

// checkMembers checks the code object's offsets of l against the members
// PyCode_Type publishes (tp_members: the names Python code reads as
// co_filename, co_name... and their offsets), as the binary itself says:
// a layout table that does not fit this build names no frame wrongly.
func (l *Layout) checkMembers(f *elf.File, codeType uint64) error {
	ptr, err := pointerReader(f)
	if err != nil {
		return err
	}
	arr, err := ptr(codeType + tpMembers)
	if err != nil || arr == 0 {
		return fmt.Errorf("%w: PyCode_Type has no tp_members", ErrUnknownVersion)
	}
	want := l.Code.memberNames()
	found := 0
	for i := uint64(0); i < 64; i++ {
		entry := arr + i*pyMemberDefSize
		namePtr, err := ptr(entry)
		if err != nil {
			return fmt.Errorf("%w: PyCode_Type's member %d: %w", ErrUnknownVersion, i, err)
		}
		if namePtr == 0 {
			break
		}
		name, err := readString(f, namePtr, 64)
		if err != nil {
			return fmt.Errorf("%w: PyCode_Type's member %d: %w", ErrUnknownVersion, i, err)
		}
		off, ok := want[name]
		if !ok {
			continue
		}
		b, err := readAt(f, entry+16, 8)
		if err != nil {
			return fmt.Errorf("%w: PyCode_Type's member %s: %w", ErrUnknownVersion, name, err)
		}
		if got := binary.LittleEndian.Uint64(b); got != uint64(off) {
			return fmt.Errorf("%w %d.%d: %s at %d in the binary, %d in memtrace's layout",
				ErrUnknownVersion, l.Major, l.Minor, name, got, off)
		}
		found++
	}
	// co_filename, co_name and co_firstlineno are members on every
	// version; co_qualname from 3.11, co_linetable from 3.10.
	if found < 3 {
		return fmt.Errorf("%w %d.%d: PyCode_Type names %d of the code object's members memtrace reads",
			ErrUnknownVersion, l.Major, l.Minor, found)
	}
	return nil
}

// pointerReader returns a reader of pointers stored in f's data: the
// addend of the R_X86_64_RELATIVE relocation that sets one (a shared
// library, a PIE), else the value in the file (an ET_EXEC binary).
func pointerReader(f *elf.File) (func(addr uint64) (uint64, error), error) {
	rel := map[uint64]uint64{}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		if s.Size > 1<<26 {
			return nil, fmt.Errorf("%w: a relocation section of %d bytes", ErrUnknownVersion, s.Size)
		}
		b, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", s.Name, err)
		}
		for i := 0; i+24 <= len(b); i += 24 {
			if binary.LittleEndian.Uint64(b[i+8:])&0xffffffff == rRelative {
				rel[binary.LittleEndian.Uint64(b[i:])] = binary.LittleEndian.Uint64(b[i+16:])
			}
		}
	}
	return func(addr uint64) (uint64, error) {
		if v, ok := rel[addr]; ok {
			return v, nil
		}
		b, err := readAt(f, addr, 8)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b), nil
	}, nil
}

// readString reads a NUL-terminated string of at most max bytes at addr.
func readString(f *elf.File, addr uint64, max int) (string, error) {
	for n := max; n > 0; n /= 2 {
		b, err := readAt(f, addr, n)
		if err != nil {
			continue // near a segment's end: a shorter read
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return string(b[:i]), nil
		}
		return "", errors.New("a member name without its end")
	}
	return "", fmt.Errorf("address %#x not in the file's data", addr)
}

// tpDealloc is PyTypeObject's tp_dealloc, from the type's start.
const tpDealloc = 48

// CodeDealloc is the virtual address, in the interpreter file f, of
// code_dealloc: the function that frees a code object, taken from
// PyCode_Type's tp_dealloc. It is static, and only ever called through
// that pointer (Py_DECREF's _Py_Dealloc), so a probe there sees every code
// object freed, where an inlined function's probe would miss calls.
// ErrNotPython when f defines no PyCode_Type.
func CodeDealloc(f *elf.File) (vaddr uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			vaddr, err = 0, fmt.Errorf("malformed ELF: %v", r)
		}
	}()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, ErrNotPython
	}
	var codeType uint64
	for _, s := range syms {
		if s.Name == "PyCode_Type" && s.Section != elf.SHN_UNDEF {
			codeType = s.Value
			break
		}
	}
	if codeType == 0 {
		return 0, ErrNotPython
	}
	ptr, err := pointerReader(f)
	if err != nil {
		return 0, err
	}
	v, err := ptr(codeType + tpDealloc)
	if err != nil {
		return 0, fmt.Errorf("read PyCode_Type's tp_dealloc: %w", err)
	}
	if !inCode(f, v) {
		return 0, fmt.Errorf("PyCode_Type's tp_dealloc %#x is not in the file's code", v)
	}
	return v, nil
}
