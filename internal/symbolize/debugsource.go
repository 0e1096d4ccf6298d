package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// debugSources lists the ELF images that may describe the module, best
// first: the separate debug file (found by build-id under a debug
// directory's .build-id/, or through .gnu_debuglink; see debugfile.go), the
// module's own file, then the MiniDebugInfo image unpacked from its
// .gnu_debugdata. Symbols are merged from all of them; line information
// and inline chains come from the first that has DWARF lines.
func (m *Module) debugSources() []*elf.File {
	m.srcOnce.Do(m.loadSources)
	return m.srcs
}

// loadSources checks the debug files found at open time, keeps the first
// that passes and closes the others, and unpacks MiniDebugInfo.
func (m *Module) loadSources() {
	var errs []error
	var srcs []*elf.File
	for _, c := range m.debugCands {
		if m.debugFile == nil {
			f, err := openDebugFile(c, m.buildID)
			if err == nil {
				srcs = append(srcs, f)
				m.debugFile, m.debugPath = c.file, c.path
				continue
			}
			errs = append(errs, err)
		}
		c.file.Close()
	}
	m.debugCands = nil
	srcs = append(srcs, m.f)
	var mini *elf.File
	err := guard("read minidebuginfo", func() error {
		var err error
		mini, err = miniDebugInfo(m.f)
		return err
	})
	errs = append(errs, err)
	if mini != nil {
		srcs = append(srcs, mini)
	}
	m.srcs = srcs
	m.srcErr = errors.Join(errs...)
}

// bestDWARF reads the line table of the first debug source that has DWARF
// line information, and indexes its compile units for inline chains. A
// module without any gets an empty table and no error: stripped code is
// normal, not a failure. Errors in some compile units leave the others'
// lines usable.
func (m *Module) bestDWARF() (*dwarfInfo, error) {
	var errs []error
	for _, src := range m.debugSources() {
		dw, err := readDWARF(src)
		errs = append(errs, err)
		if dw.hasLines() {
			return dw, errors.Join(errs...)
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
	dw, err := readDWARF(f)
	return dw.lines(), err
}

// readDWARF reads f's line programs (see dwarfLineTable) and the address
// ranges of its compile units, or returns nil if it has no line programs.
func readDWARF(f *elf.File) (*dwarfInfo, error) {
	return readDWARFUnits(f, true)
}

// readDWARFUnits is readDWARF, with units' abbreviation tables parsed when
// first needed (lazy) or all at once.
func readDWARFUnits(f *elf.File, lazy bool) (*dwarfInfo, error) {
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
	// The sections are inflated side by side (libc's debug file: ~60 ms
	// of a report's wait, on one core).
	var lineData []byte
	var lineErr error
	lineRead := make(chan struct{})
	go func() {
		defer close(lineRead)
		lineData, lineErr = line.Data()
	}()
	secs := readSections(f)
	<-lineRead
	if lineErr != nil {
		return nil, fmt.Errorf("dwarf: .debug_line: %w", lineErr)
	}
	src, err := dwarfData(secs, lineData, lazy)
	if err != nil {
		return nil, fmt.Errorf("dwarf: %w", err)
	}
	vet := func(off int64) error {
		return checkLineHeader(lineData, off, f.ByteOrder)
	}
	return readUnits(src, infoSize, vet)
}

// dwarfSections are the sections debug/dwarf reads: elf.File.DWARF also
// inflates the others (.debug_loclists, .debug_aranges, .debug_macro...),
// which it then drops, and reads .debug_line a second time. libc's
// .debug_loclists alone is 1.4 MB.
var dwarfSections = map[string]bool{
	".debug_abbrev": true, ".debug_info": true, ".debug_str": true, ".debug_ranges": true,
	".debug_types": true, ".debug_addr": true, ".debug_line_str": true,
	".debug_str_offsets": true, ".debug_rnglists": true,
}

// section is one of f's sections debug/dwarf reads, with its contents.
type section struct {
	s   *elf.Section
	b   []byte
	err error
}

// readSections reads the sections debug/dwarf reads (dwarfSections), in
// f's order, each in a goroutine of its own.
func readSections(f *elf.File) []section {
	var secs []section
	for _, s := range f.Sections {
		if dwarfSections[s.Name] {
			secs = append(secs, section{s: s})
		}
	}
	var wg sync.WaitGroup
	for i := range secs {
		wg.Go(func() { secs[i].b, secs[i].err = secs[i].s.Data() })
	}
	wg.Wait()
	return secs
}

// dwarfData gives debug/dwarf the sections read, as elf.File.DWARF
// would for a linked file (no relocations to apply; readDWARF refuses the
// others), with .debug_line's contents given (dwarfsrc.go).
func dwarfData(secs []section, line []byte, lazy bool) (*dwarfSource, error) {
	dat := map[string][]byte{}
	var types [][]byte
	for _, sec := range secs {
		s, b, err := sec.s, sec.b, sec.err
		if err != nil && uint64(len(b)) < s.Size {
			return nil, err
		}
		if s.Name == ".debug_types" {
			types = append(types, b)
			continue
		}
		dat[s.Name] = b // of duplicates the last, as elf.File.DWARF
	}
	return newDwarfSource(dat[".debug_abbrev"], dat[".debug_info"], line, dat, types, lazy)
}

func relocatesDebug(f *elf.File, rel *elf.Section) bool {
	return int(rel.Info) < len(f.Sections) && isDebugSection(f.Sections[rel.Info].Name)
}

func isDebugSection(name string) bool {
	return strings.HasPrefix(name, ".debug_")
}
