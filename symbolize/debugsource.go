package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"strings"
)

// debugSources lists the ELF images that may describe the module, best
// first. Symbols are merged from all of them; line information comes from
// the first that has any.
//
// Today that is only the module's own file. This is where a separate debug
// file (found by build-id under /usr/lib/debug/.build-id, or through
// .gnu_debuglink) goes in front, and the MiniDebugInfo image unpacked from
// .gnu_debugdata goes after.
func (m *Module) debugSources() []*elf.File {
	return []*elf.File{m.f}
}

// bestLineTable returns the line table of the first debug source that has
// DWARF line information. A module without any gets an empty table and no
// error: stripped code is normal, not a failure. Errors in some compile
// units leave the others' lines usable.
func (m *Module) bestLineTable() (*lineTable, error) {
	var errs []error
	for _, src := range m.debugSources() {
		t, err := dwarfLineTable(src)
		errs = append(errs, err)
		if t != nil && len(t.rows) > 0 {
			return t, errors.Join(errs...)
		}
	}
	return nil, errors.Join(errs...)
}

// maxDebugSection bounds one DWARF section's (uncompressed) size. Real
// ones stay well below; a header that claims more is hostile, and
// believing it would make us inflate or allocate that much.
const maxDebugSection = 2 << 30

// dwarfLineTable reads f's line programs, or returns nil if it has none.
//
// Each line program header is vetted (checkLineHeader) against the bytes
// debug/dwarf will read, so those bytes must be exactly .debug_line's
// contents: files where debug/dwarf would read other bytes are refused.
// Those are object files (relocated debug sections; never mapped by a
// process anyway), the legacy .zdebug_ compression, duplicate sections,
// and relocations aimed at debug sections in a linked file.
func dwarfLineTable(f *elf.File) (*lineTable, error) {
	if f.Type == elf.ET_REL {
		return nil, nil
	}
	var line *elf.Section
	var infoSize uint64
	for i, s := range f.Sections {
		switch {
		case strings.HasPrefix(s.Name, ".zdebug_"):
			return nil, errors.New("dwarf: .zdebug_ sections not supported")
		case (s.Type == elf.SHT_REL || s.Type == elf.SHT_RELA) && relocatesDebug(f, s):
			return nil, fmt.Errorf("dwarf: section %d relocates debug information", i)
		case !isDebugSection(s.Name):
			continue
		case s.Type != elf.SHT_NOBITS && s.Size > maxDebugSection:
			return nil, fmt.Errorf("dwarf: section %s: size %d too large", s.Name, s.Size)
		case s.Name == ".debug_line" && line != nil:
			return nil, errors.New("dwarf: two .debug_line sections")
		case s.Name == ".debug_line":
			line = s
		case s.Name == ".debug_info":
			infoSize = s.Size
		}
	}
	if line == nil || line.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	lineData, err := line.Data()
	if err != nil {
		return nil, fmt.Errorf("dwarf: .debug_line: %w", err)
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("dwarf: %w", err)
	}
	return readLineTable(d, infoSize, func(off int64) error {
		return checkLineHeader(lineData, off, f.ByteOrder)
	})
}

func relocatesDebug(f *elf.File, rel *elf.Section) bool {
	return int(rel.Info) < len(f.Sections) && isDebugSection(f.Sections[rel.Info].Name)
}

func isDebugSection(name string) bool {
	return strings.HasPrefix(name, ".debug_")
}
