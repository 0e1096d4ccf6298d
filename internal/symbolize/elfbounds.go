package symbolize

import (
	"debug/elf"
	"errors"
)

var errTableTooLarge = errors.New("symbol table larger than 1 GiB")

// maxTableBytes bounds a symbol table, a dynamic section, and the string
// table each links to. debug/elf reads them whole (inflating one marked
// compressed), so a crafted header claiming gigabytes would cost what it
// claims; the biggest real ones (a browser's .symtab) are some hundreds
// of MB.
const maxTableBytes = 1 << 30

// TablesFit reports whether every section of f of type typ (SHT_SYMTAB,
// SHT_DYNSYM, SHT_DYNAMIC), and the string table it links to, claims at
// most maxTableBytes: check it before f.Symbols, f.DynamicSymbols,
// f.ImportedLibraries or f.DynString.
func TablesFit(f *elf.File, typ elf.SectionType) bool {
	for _, s := range f.Sections {
		// Reading dynamic symbols reads their versions too.
		versions := typ == elf.SHT_DYNSYM && (s.Type == elf.SHT_GNU_VERSYM || s.Type == elf.SHT_GNU_VERNEED || s.Type == elf.SHT_GNU_VERDEF)
		if s.Type != typ && !versions {
			continue
		}
		if s.Size > maxTableBytes {
			return false
		}
		if l := int(s.Link); l > 0 && l < len(f.Sections) && f.Sections[l].Size > maxTableBytes {
			return false
		}
	}
	return true
}
