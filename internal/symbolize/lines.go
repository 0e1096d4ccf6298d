package symbolize

import (
	"cmp"
	"debug/dwarf"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// lineRow says that code from addr up to the next row's addr comes from
// files[file]:line. file < 0 marks the end of a sequence: the addresses
// from there on have no line information (until another row starts).
type lineRow struct {
	addr uint64
	file int32
	line int32
}

// lineTable is every compile unit's line program flattened into one table
// sorted by address, so a lookup is one binary search.
type lineTable struct {
	rows  []lineRow
	files []string
}

// maxLineRows bounds the table (16 bytes a row): a debug section that
// inflates to billions of rows is hostile, not a program we can symbolize.
const maxLineRows = 1 << 27

var errTooManyRows = errors.New("too many line table rows")

// maxUnitErrors bounds the errors kept from broken compile units.
const maxUnitErrors = 8

// unitLines is one compile unit's line rows, read on its first lookup.
type unitLines struct {
	offset dwarf.Offset // of the unit's entry in .debug_info
	count  int          // its rows, as first read

	once sync.Once
	tab  *lineTable
}

// readUnits runs the line program of every compile unit in d, and notes
// each unit's address ranges for inline chains (inline.go). vet checks a
// unit's line program header (by its offset in .debug_line) before
// debug/dwarf reads it. A broken unit is left out and reported; the others
// still count.
//
// The rows are not kept: each unit's are read again, into a table of its
// own, when an address in it is first looked up (lineAt). A report names a
// few addresses of a big debug file, and libc's rows alone take several
// megabytes. Only when the units' rows interleave (no real linker output
// does) is one table of all rows kept, so that lookups give what that
// table gives either way.
//
// infoSize is the size of .debug_info: each top-level entry takes at least
// a byte of it, so more steps than that mean debug/dwarf is not advancing
// (it returns empty entries forever on a truncated number at the end of a
// unit) and the walk stops.
func readUnits(src *dwarfSource, infoSize uint64, vet func(stmtList int64) error) (*dwarfInfo, error) {
	dw := &dwarfInfo{src: src, infoSize: infoSize}
	var errs []error
	unitErr := func(err error) {
		if len(errs) < maxUnitErrors {
			errs = append(errs, err)
		}
	}

	scratch := &lineTable{}
	total := 0
	var seqs []lineSeq
	// visit notes one top-level entry; true stops the walk.
	visit := func(d *dwarf.Data, cu *dwarf.Entry) bool {
		if cu.Tag != dwarf.TagCompileUnit && cu.Tag != dwarf.TagPartialUnit {
			return false
		}
		linesOK := true
		if off, ok := cu.Val(dwarf.AttrStmtList).(int64); ok {
			if err := vet(off); err != nil {
				unitErr(fmt.Errorf("line program at %#x: %w", off, err))
				linesOK = false
			}
		}
		dw.addUnit(d, cu, linesOK)
		if !linesOK {
			return false
		}
		lr, err := d.LineReader(cu)
		if err != nil {
			unitErr(fmt.Errorf("line program of unit %#x: %w", cu.Offset, err))
			return false
		}
		if lr == nil {
			return false // a unit without line information
		}
		scratch.reset()
		if err := scratch.addUnit(lr, maxLineRows-total); err != nil {
			// A half-read unit could claim addresses it never ends.
			unitErr(fmt.Errorf("line program of unit %#x: %w", cu.Offset, err))
			return errors.Is(err, errTooManyRows)
		}
		if n := len(scratch.rows); n > 0 {
			total += n
			dw.lineUnits = append(dw.lineUnits, &unitLines{offset: cu.Offset, count: n})
			seqs = appendSeqs(seqs, scratch.rows, int32(len(dw.lineUnits)-1))
		}
		return false
	}
	if src.lazy() {
		walkUnitsByBatch(src, visit, unitErr)
	} else {
		walkUnits(src.cur, infoSize, visit, unitErr)
	}
	dw.indexLines(seqs)
	dw.sortUnits()
	return dw, errors.Join(errs...)
}

// walkUnits visits the top-level entries of d.
func walkUnits(d *dwarf.Data, infoSize uint64, visit func(*dwarf.Data, *dwarf.Entry) bool, unitErr func(error)) {
	r := d.Reader()
	for steps := uint64(0); ; steps++ {
		if steps > infoSize {
			unitErr(errors.New("compile units: reader does not advance"))
			return
		}
		cu, err := r.Next()
		if err != nil {
			unitErr(fmt.Errorf("read compile unit: %w", err))
			return
		}
		if cu == nil {
			return
		}
		r.SkipChildren()
		if visit(d, cu) {
			return
		}
	}
}

// walkUnitsByBatch visits each unit's first entry, opening indexBatch
// units at a time: their abbreviation tables are dropped once visited.
func walkUnitsByBatch(src *dwarfSource, visit func(*dwarf.Data, *dwarf.Entry) bool, unitErr func(error)) {
	for i := 0; i < len(src.units); i += indexBatch {
		j := min(i+indexBatch, len(src.units))
		d, err := src.batch(i, j)
		if err != nil {
			unitErr(fmt.Errorf("read compile unit: %w", err))
			return
		}
		r := d.Reader()
		for k := i; k < j; k++ {
			r.Seek(dwarf.Offset(src.units[k].die))
			cu, err := r.Next()
			if err != nil {
				unitErr(fmt.Errorf("read compile unit: %w", err))
				return
			}
			if cu != nil && visit(d, cu) {
				return
			}
		}
	}
}

// lineSeq is one sequence of a unit's line program: rows from lo to hi.
// loCode and hiCode say whether a row at lo, at hi, is code rather than an
// end of sequence.
type lineSeq struct {
	lo, hi         uint64
	unit           int32
	loCode, hiCode bool
}

// appendSeqs notes the sequences of one unit's rows (in program order).
func appendSeqs(seqs []lineSeq, rows []lineRow, unit int32) []lineSeq {
	start := 0
	for i, r := range rows {
		if r.file >= 0 && i < len(rows)-1 {
			continue
		}
		sq := lineSeq{lo: rows[start].addr, hi: rows[start].addr, unit: unit}
		for _, r := range rows[start : i+1] {
			if r.addr < sq.lo {
				sq.lo, sq.loCode = r.addr, false
			}
			if r.addr > sq.hi {
				sq.hi, sq.hiCode = r.addr, false
			}
			sq.loCode = sq.loCode || r.addr == sq.lo && r.file >= 0
			sq.hiCode = sq.hiCode || r.addr == sq.hi && r.file >= 0
		}
		seqs = append(seqs, sq)
		start = i + 1
	}
	return seqs
}

// indexLines sorts the sequences by their lowest address, or, when their
// rows interleave, reads all units' rows into one table.
//
// One table of all units' rows, sorted (stably) by address, answers a
// lookup with the last row at or below the address; at one address ends
// of sequence sort first, then code rows in the units' order. The table of
// the unit whose sequence starts last at or below the address answers the
// same when no other unit has a row between that start and the address:
// when each sequence's rows end below the next sequence's lowest, or at
// it with ends of sequence only, or where the next starts with code of a
// unit not before (whose rows at that address come last in both tables).
// Linkers lay out sequences so; only odd files make one table.
func (dw *dwarfInfo) indexLines(seqs []lineSeq) {
	slices.SortStableFunc(seqs, func(a, b lineSeq) int { return cmp.Compare(a.lo, b.lo) })
	for k := 1; k < len(seqs); k++ {
		if !seqsApart(seqs[k-1], seqs[k]) {
			dw.lineTab = dw.allLines()
			dw.lineUnits = nil
			return
		}
	}
	dw.lineSeqs = slices.Clip(seqs)
}

// seqsApart says whether a lookup at or after next's start needs no rows
// of prev beyond its own unit's (see indexLines); next starts no lower.
func seqsApart(prev, next lineSeq) bool {
	return prev.hi < next.lo || prev.hi == next.lo && (!prev.hiCode || next.loCode && prev.unit <= next.unit)
}

// allLines reads every unit's rows, in the order first read, into one
// table.
func (dw *dwarfInfo) allLines() *lineTable {
	t := &lineTable{}
	offs := make([]dwarf.Offset, len(dw.lineUnits))
	for i, u := range dw.lineUnits {
		offs[i] = u.offset
	}
	d, err := dw.src.data(offs...)
	if err != nil {
		return t
	}
	for _, u := range dw.lineUnits {
		t.readUnit(d, u, t.intern())
	}
	t.sort()
	return t
}

// hasLines says whether any unit has line rows.
func (dw *dwarfInfo) hasLines() bool {
	return dw != nil && (len(dw.lineUnits) > 0 || dw.lineTab != nil && len(dw.lineTab.rows) > 0)
}

// lines is one table of all the module's rows (read now if not yet).
func (dw *dwarfInfo) lines() *lineTable {
	if dw == nil {
		return nil
	}
	if dw.lineTab != nil {
		return dw.lineTab
	}
	return dw.allLines()
}

// lineAt gives the file and line of the instruction at vaddr, or ("", 0),
// reading the rows of the unit that holds it on first use.
func (dw *dwarfInfo) lineAt(vaddr uint64) (string, int) {
	if dw == nil {
		return "", 0
	}
	if dw.lineTab != nil {
		return dw.lineTab.lookup(vaddr)
	}
	i := searchLast(len(dw.lineSeqs), func(i int) bool { return dw.lineSeqs[i].lo <= vaddr })
	if i < 0 {
		return "", 0
	}
	u := dw.lineUnits[dw.lineSeqs[i].unit]
	u.once.Do(func() {
		t := &lineTable{}
		_ = guard("read line table", func() error {
			d, err := dw.src.data(u.offset)
			if err != nil {
				return err
			}
			t.readUnit(d, u, t.intern())
			t.sort()
			return nil
		})
		t.rows = slices.Clip(t.rows)
		u.tab = t
	})
	return u.tab.lookup(vaddr)
}

// readUnit appends the rows of u, read again. They were read once without
// error, and debug/dwarf reads the same bytes the same way; should it
// fail now, the unit's rows are left out.
func (t *lineTable) readUnit(d *dwarf.Data, u *unitLines, intern func(*dwarf.LineFile) int32) {
	r := d.Reader()
	r.Seek(u.offset)
	cu, err := r.Next()
	if err != nil || cu == nil {
		return
	}
	lr, err := d.LineReader(cu)
	if err != nil || lr == nil {
		return
	}
	mark := len(t.rows)
	t.rows = slices.Grow(t.rows, u.count)
	if err := t.addUnitRows(lr, intern, mark+u.count); err != nil {
		t.rows = t.rows[:mark]
	}
}

// intern returns a function that numbers files by name in t.files.
func (t *lineTable) intern() func(*dwarf.LineFile) int32 {
	fileIndex := map[*dwarf.LineFile]int32{}
	nameIndex := map[string]int32{}
	for i, n := range t.files {
		nameIndex[n] = int32(i)
	}
	return func(f *dwarf.LineFile) int32 {
		if i, ok := fileIndex[f]; ok {
			return i
		}
		name := ""
		if f != nil {
			name = f.Name
		}
		i, ok := nameIndex[name]
		if !ok {
			i = int32(len(t.files))
			t.files = append(t.files, name)
			nameIndex[name] = i
		}
		fileIndex[f] = i
		return i
	}
}

// reset empties t for the next unit, keeping its memory.
func (t *lineTable) reset() {
	t.rows = t.rows[:0]
	t.files = t.files[:0]
}

// addUnit appends one unit's rows, at most limit, numbering no files: it
// is for learning the unit's addresses.
func (t *lineTable) addUnit(lr *dwarf.LineReader, limit int) error {
	return t.addUnitRows(lr, func(*dwarf.LineFile) int32 { return 0 }, limit)
}

// addUnitRows appends one unit's rows, until t holds limit. Rows keep their program order (stable
// sort later), so of several rows at one address the last one, which owns
// the instruction bytes, wins.
func (t *lineTable) addUnitRows(lr *dwarf.LineReader, intern func(*dwarf.LineFile) int32, limit int) error {
	var e dwarf.LineEntry
	inSeq, skipSeq := false, false
	for {
		err := lr.Next(&e)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !inSeq {
			// Linkers leave the sequences of discarded functions at address
			// 0, where no code of an executable or library is loaded.
			inSeq, skipSeq = true, e.Address == 0
		}
		if e.EndSequence {
			inSeq = false
		}
		if skipSeq {
			continue
		}
		if len(t.rows) >= limit {
			return errTooManyRows
		}
		row := lineRow{addr: e.Address, file: -1}
		if !e.EndSequence {
			row.file = intern(e.File)
			row.line = int32(min(max(e.Line, 0), 1<<31-1))
		}
		t.rows = append(t.rows, row)
	}
}

// sort orders rows by address. At equal addresses an end-of-sequence row
// goes first, so that a sequence starting where another ends is not hidden
// by that end marker.
func (t *lineTable) sort() {
	slices.SortStableFunc(t.rows, func(a, b lineRow) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(boolInt(a.file >= 0), boolInt(b.file >= 0))
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lookup returns the file and line of the instruction at vaddr, or ("", 0).
func (t *lineTable) lookup(vaddr uint64) (string, int) {
	if t == nil {
		return "", 0
	}
	i := searchLast(len(t.rows), func(i int) bool { return t.rows[i].addr <= vaddr })
	if i < 0 {
		return "", 0
	}
	row := t.rows[i]
	if row.file < 0 {
		return "", 0
	}
	return t.files[row.file], int(row.line)
}
