package symbolize

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
)

// debug/dwarf parses every unit's abbreviation table when it opens the
// data (dwarf.New), and keeps them: 17 MB for libc6-dbg's 2 063 units,
// where a report needs a few. dwarfSource opens the data with only some
// units' tables: the others' headers are pointed at one empty table
// appended to .debug_abbrev, so their entries are never decoded, while
// every offset stays as in the file. A unit is opened (its header given
// back its own table, and the data opened again) when an entry in it is
// first read. Past maxOpenUnits opened, all are, as before.

// maxOpenUnits bounds the units opened one by one: each opening parses
// again the tables of those already open.
const maxOpenUnits = 64

// indexBatch is how many units the first pass over them opens at once.
const indexBatch = 64

// unitHead is one unit header of .debug_info.
type unitHead struct {
	base, die, end uint64 // the header's offset, the first entry's, the unit's end
	field          int    // the abbreviation offset's position
	abbrev         uint64 // the unit's own abbreviation table
	is64, open     bool
}

// dwarfSource makes dwarf.Data with chosen units' tables. Safe for
// concurrent use: headers are rewritten only under mu, and a dwarf.Data
// reads them only while opened.
type dwarfSource struct {
	mu     sync.Mutex
	order  binary.ByteOrder
	abbrev []byte // .debug_abbrev and one empty table at its end
	info   []byte
	line   []byte
	dat    map[string][]byte
	types  [][]byte
	units  []unitHead // nil: all units open in cur
	opened int
	cur    *dwarf.Data
}

// newDwarfSource returns a source whose units are all closed, or, unless
// lazy, or for a
// .debug_info whose headers it does not know to the byte as debug/dwarf
// reads them, one with all open.
func newDwarfSource(abbrev, info, line []byte, dat map[string][]byte, types [][]byte, lazy bool) (*dwarfSource, error) {
	s := &dwarfSource{abbrev: abbrev, info: info, line: line, dat: dat, types: types}
	units, order, ok := unitHeads(info)
	if !lazy || !ok || len(units) == 0 {
		d, err := s.open()
		s.cur = d
		return s, err
	}
	empty := uint64(len(abbrev))
	s.abbrev = append(abbrev[:len(abbrev):len(abbrev)], 0)
	delete(dat, ".debug_abbrev") // the copy above is the one kept
	s.units, s.order = units, order
	for i := range units {
		s.setAbbrev(&units[i], empty)
	}
	return s, nil
}

// lazy says whether units are opened one by one.
func (s *dwarfSource) lazy() bool { return s.units != nil }

// unitHeads reads the unit headers of .debug_info as debug/dwarf does, or
// says ok=false when one is anything but a plain DWARF 2 to 5 compile or
// partial unit (those are read with all units open).
func unitHeads(info []byte) (units []unitHead, order binary.ByteOrder, ok bool) {
	if len(info) < 6 {
		return nil, nil, false
	}
	order = binary.LittleEndian
	switch {
	case info[4] == 0 && info[5] != 0:
		order = binary.BigEndian
	case info[5] != 0 || info[4] == 0:
		return nil, nil, false
	}
	for off := uint64(0); off < uint64(len(info)); {
		u := unitHead{base: off}
		rest := uint64(len(info)) - off
		if rest < 4 {
			return nil, nil, false
		}
		n := uint64(order.Uint32(info[off:]))
		hdr := uint64(4)
		if n == 0xffffffff {
			if rest < 12 {
				return nil, nil, false
			}
			n, hdr, u.is64 = order.Uint64(info[off+4:]), 12, true
		}
		if n == 0 || n >= 0xfffffff0 && !u.is64 || n > rest-hdr || n > 1<<32-1 {
			return nil, nil, false
		}
		u.end = off + hdr + n
		p := off + hdr
		vers := order.Uint16(info[p:])
		p += 2
		if vers < 2 || vers > 5 {
			return nil, nil, false
		}
		if vers == 5 {
			if ut := info[p]; ut != 0x01 && ut != 0x03 { // DW_UT_compile, DW_UT_partial
				return nil, nil, false
			}
			p += 2
		}
		u.field = int(p)
		if u.is64 {
			u.abbrev, p = order.Uint64(info[p:]), p+8
		} else {
			u.abbrev, p = uint64(order.Uint32(info[p:])), p+4
		}
		if vers < 5 {
			p++
		}
		if p > u.end {
			return nil, nil, false
		}
		u.die = p
		units = append(units, u)
		off = u.end
	}
	return units, order, true
}

func (s *dwarfSource) setAbbrev(u *unitHead, off uint64) {
	if u.is64 {
		s.order.PutUint64(s.info[u.field:], off)
	} else {
		s.order.PutUint32(s.info[u.field:], uint32(off))
	}
}

// open makes a dwarf.Data of the sections as they are now, as
// elf.File.DWARF would.
func (s *dwarfSource) open() (*dwarf.Data, error) {
	d, err := dwarf.New(s.abbrev, nil, nil, s.info, s.line, nil, s.dat[".debug_ranges"], s.dat[".debug_str"])
	if err != nil {
		return nil, err
	}
	for i, b := range s.types {
		if err := d.AddTypes(fmt.Sprintf("types-%d", i), b); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{".debug_addr", ".debug_line_str", ".debug_str_offsets", ".debug_rnglists"} {
		if b, ok := s.dat[name]; ok {
			if err := d.AddSection(name, b); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// unitOf is the index of the unit holding offset off, or -1.
func (s *dwarfSource) unitOf(off dwarf.Offset) int {
	i := sort.Search(len(s.units), func(i int) bool { return s.units[i].end > uint64(off) })
	if i < len(s.units) && s.units[i].base <= uint64(off) {
		return i
	}
	return -1
}

// data returns a dwarf.Data in which the units holding offs are open.
func (s *dwarfSource) data(offs ...dwarf.Offset) (*dwarf.Data, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.units == nil {
		return s.cur, nil
	}
	changed := s.cur == nil
	for _, off := range offs {
		if i := s.unitOf(off); i >= 0 && !s.units[i].open {
			s.units[i].open = true
			s.setAbbrev(&s.units[i], s.units[i].abbrev)
			s.opened++
			changed = true
		}
	}
	if s.opened > maxOpenUnits {
		for i := range s.units {
			s.setAbbrev(&s.units[i], s.units[i].abbrev)
		}
		s.units = nil
		changed = true
	}
	if !changed {
		return s.cur, nil
	}
	d, err := s.open()
	if err != nil {
		return nil, err
	}
	s.cur = d
	return d, nil
}

// batch returns a dwarf.Data in which units[i:j] are open, for the first
// pass over them; they are closed again (for later Data) before it
// returns, unless opened for good.
func (s *dwarfSource) batch(i, j int) (*dwarf.Data, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := i; k < j; k++ {
		s.setAbbrev(&s.units[k], s.units[k].abbrev)
	}
	d, err := s.open()
	empty := uint64(len(s.abbrev) - 1)
	for k := i; k < j; k++ {
		if !s.units[k].open {
			s.setAbbrev(&s.units[k], empty)
		}
	}
	return d, err
}
