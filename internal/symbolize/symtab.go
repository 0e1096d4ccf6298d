package symbolize

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"slices"
)

// readFuncs adds the defined function symbols of f's table typ (.symtab
// or .dynsym) to dst, as collectFuncs does with f.Symbols or
// f.DynamicSymbols, without their cost: those make a string of every
// symbol's name, functions or not (node's 110 000 symbols and 7.5 MB of
// names: ~40 ms of the ~100 ms node's symbols took, and as much garbage).
// Here the names of functions alone are copied, into one string. Other
// than 64-bit files go through debug/elf.
func readFuncs(dst []rankedSymbol, f *elf.File, typ elf.SectionType) ([]rankedSymbol, error) {
	if f.Class != elf.ELFCLASS64 {
		read := f.Symbols
		if typ == elf.SHT_DYNSYM {
			read = f.DynamicSymbols
		}
		syms, err := read()
		return collectFuncs(dst, syms), err
	}
	sec := f.SectionByType(typ)
	if sec == nil {
		return dst, elf.ErrNoSymbols
	}
	data, err := sec.Data()
	if err != nil {
		return dst, fmt.Errorf("cannot load symbol section: %w", err)
	}
	if len(data) == 0 {
		return dst, elf.ErrNoSymbols
	}
	if len(data)%elf.Sym64Size != 0 {
		return dst, errors.New("length of symbol section is not a multiple of Sym64Size")
	}
	if sec.Link == 0 || int(sec.Link) >= len(f.Sections) {
		return dst, errors.New("cannot load string table section: section has invalid string table link")
	}
	strs, err := f.Sections[sec.Link].Data()
	if err != nil {
		return dst, fmt.Errorf("cannot load string table section: %w", err)
	}
	// Two passes over the table: the first counts the functions and their
	// names' bytes, the second copies them, with no slice grown as it goes.
	bo := f.ByteOrder
	each := func(fn func(info byte, value, size uint64, name []byte)) {
		for d := data[elf.Sym64Size:]; len(d) >= elf.Sym64Size; d = d[elf.Sym64Size:] {
			info := d[4]
			if t := elf.ST_TYPE(info); t != elf.STT_FUNC && t != sttGNUIFunc {
				continue
			}
			value := bo.Uint64(d[8:16])
			if value == 0 || elf.SectionIndex(bo.Uint16(d[6:8])) == elf.SHN_UNDEF {
				continue
			}
			name := cString(strs, int(bo.Uint32(d[0:4])))
			if i := bytes.IndexByte(name, '@'); i > 0 {
				name = name[:i] // as stripVersion
			}
			if len(name) > 0 {
				fn(info, value, bo.Uint64(d[16:24]), name)
			}
		}
	}
	n, size := 0, 0
	each(func(_ byte, _, _ uint64, name []byte) { n, size = n+1, size+len(name) })
	type span struct{ off, end int }
	names := make([]byte, 0, size)
	spans := make([]span, 0, n)
	start := len(dst)
	dst = slices.Grow(dst, n)
	each(func(info byte, value, size uint64, name []byte) {
		spans = append(spans, span{len(names), len(names) + len(name)})
		names = append(names, name...)
		dst = append(dst, rankedSymbol{symbol: symbol{addr: value, size: size}, binding: elf.ST_BIND(info)})
	})
	all := string(names)
	for i, s := range spans {
		dst[start+i].name = all[s.off:s.end]
	}
	return dst, nil
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
