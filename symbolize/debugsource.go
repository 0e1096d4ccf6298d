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
// error: stripped code is normal, not a failure.
func (m *Module) bestLineTable() (*lineTable, error) {
	var errs []error
	for _, src := range m.debugSources() {
		if !hasDWARF(src) {
			continue
		}
		t, err := dwarfLineTable(src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(t.rows) > 0 {
			return t, nil
		}
	}
	return nil, errors.Join(errs...)
}

// maxDebugSection bounds one DWARF section's (uncompressed) size. Real
// ones stay well below; a header that claims more is hostile, and
// believing it would make us inflate or allocate that much.
const maxDebugSection = 2 << 30

func hasDWARF(f *elf.File) bool {
	return f.Section(".debug_line") != nil || f.Section(".zdebug_line") != nil
}

func dwarfLineTable(f *elf.File) (*lineTable, error) {
	for _, s := range f.Sections {
		if isDebugSection(s.Name) && s.Type != elf.SHT_NOBITS && s.Size > maxDebugSection {
			return nil, fmt.Errorf("section %s: size %d too large", s.Name, s.Size)
		}
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("dwarf: %w", err)
	}
	return readLineTable(d)
}

func isDebugSection(name string) bool {
	return strings.HasPrefix(name, ".debug_") || strings.HasPrefix(name, ".zdebug_")
}
