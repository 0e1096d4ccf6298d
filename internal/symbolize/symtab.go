package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// readFuncs adds the defined function symbols of f's table typ (.symtab
// or .dynsym) to dst, as collectFuncs does with f.Symbols or
// f.DynamicSymbols, without their cost: those make a string of every
// symbol's name, functions or not (node's 110 000 symbols and 7.5 MB of
// names). Here an entry's type is checked before its name is looked for,
// and the names are the string table's own bytes, which nothing writes
// after (the table is read into memory of its own): no copy, one pass.
// Other than 64-bit files go through debug/elf.
func readFuncs(dst []rankedSymbol, f *elf.File, typ elf.SectionType) ([]rankedSymbol, error) {
	if f.Class != elf.ELFCLASS64 {
		read := f.Symbols
		if typ == elf.SHT_DYNSYM {
			read = f.DynamicSymbols
		}
		syms, err := read()
		return collectFuncs(dst, syms), err
	}
	data, strs, err := symbolSection(f, typ)
	if err != nil {
		return dst, err
	}
	// Counted first, so that dst grows once; a name is looked for only
	// for a function's entry.
	n := 0
	eachSymbol64(f.ByteOrder, data, strs, func(info byte) bool {
		if isFunc(info) {
			n++
		}
		return false
	}, nil)
	dst = slices.Grow(dst, n)
	eachSymbol64(f.ByteOrder, data, strs, isFunc, func(s RawSymbol) {
		if s.Value == 0 || s.Section == elf.SHN_UNDEF {
			return
		}
		name := s.Name
		if i := bytes.IndexByte(name, '@'); i > 0 {
			name = name[:i] // as stripVersion
		}
		if len(name) > 0 {
			dst = append(dst, rankedSymbol{symbol: symbol{addr: s.Value, size: s.Size,
				name: unsafe.String(&name[0], len(name))}, binding: elf.ST_BIND(s.Info)})
		}
	})
	return dst, nil
}

// RawSymbol is one entry of a symbol table as EachSymbol gives it: Name
// is the table's bytes (a version suffix kept, as debug/elf keeps it), valid
// during the call only.
type RawSymbol struct {
	Name        []byte
	Info        byte
	Section     elf.SectionIndex
	Value, Size uint64
}

// EachSymbol calls fn with every entry of f's symbol table typ (.symtab
// or .dynsym), as f.Symbols or f.DynamicSymbols list them, without making
// a string of every name: a caller after a few names (allocator's) reads
// node's 180 000 symbols in a fraction of their time. Its errors are
// debug/elf's, elf.ErrNoSymbols among them. Other than 64-bit files go
// through debug/elf.
func EachSymbol(f *elf.File, typ elf.SectionType, fn func(RawSymbol)) error {
	if f.Class != elf.ELFCLASS64 {
		read := f.Symbols
		if typ == elf.SHT_DYNSYM {
			read = f.DynamicSymbols
		}
		syms, err := read()
		for _, s := range syms {
			fn(RawSymbol{Name: []byte(s.Name), Info: s.Info, Section: s.Section, Value: s.Value, Size: s.Size})
		}
		return err
	}
	data, strs, err := symbolSection(f, typ)
	if err != nil {
		return err
	}
	eachSymbol64(f.ByteOrder, data, strs, nil, fn)
	return nil
}

// isFunc: a symbol of this type (st_info) is a function.
func isFunc(info byte) bool {
	t := elf.ST_TYPE(info)
	return t == elf.STT_FUNC || t == sttGNUIFunc
}

// symbolSection reads a 64-bit file's symbol table typ and its string
// table, checked as debug/elf checks them.
func symbolSection(f *elf.File, typ elf.SectionType) (data, strs []byte, err error) {
	sec := f.SectionByType(typ)
	if sec == nil {
		return nil, nil, elf.ErrNoSymbols
	}
	data, err = sec.Data()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot load symbol section: %w", err)
	}
	if len(data) == 0 {
		return nil, nil, elf.ErrNoSymbols
	}
	if len(data)%elf.Sym64Size != 0 {
		return nil, nil, errors.New("length of symbol section is not a multiple of Sym64Size")
	}
	if sec.Link == 0 || int(sec.Link) >= len(f.Sections) {
		return nil, nil, errors.New("cannot load string table section: section has invalid string table link")
	}
	strs, err = f.Sections[sec.Link].Data()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot load string table section: %w", err)
	}
	return data, strs, nil
}

// eachSymbol64 calls fn with every entry of a 64-bit symbol table past
// its null entry that keep keeps (by its st_info; nil: all), its name
// looked for only then.
func eachSymbol64(bo binary.ByteOrder, data, strs []byte, keep func(info byte) bool, fn func(RawSymbol)) {
	for d := data[elf.Sym64Size:]; len(d) >= elf.Sym64Size; d = d[elf.Sym64Size:] {
		if keep != nil && !keep(d[4]) {
			continue
		}
		fn(RawSymbol{
			Name:    cString(strs, int(bo.Uint32(d[0:4]))),
			Info:    d[4],
			Section: elf.SectionIndex(bo.Uint16(d[6:8])),
			Value:   bo.Uint64(d[8:16]),
			Size:    bo.Uint64(d[16:24]),
		})
	}
}

// cString is the NUL-terminated string at off in a string table; nil
// when off is outside it or the string has no end (debug/elf's "").
func cString(strs []byte, off int) []byte {
	if off < 0 || off >= len(strs) {
		return nil
	}
	end := bytes.IndexByte(strs[off:], 0)
	if end < 0 {
		return nil
	}
	return strs[off : off+end]
}
