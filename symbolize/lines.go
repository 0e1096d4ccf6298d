package symbolize

import (
	"cmp"
	"debug/dwarf"
	"errors"
	"fmt"
	"io"
	"slices"
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

// readUnits runs the line program of every compile unit in d, and notes
// each unit's address ranges for inline chains (inline.go). vet checks a
// unit's line program header (by its offset in .debug_line) before
// debug/dwarf reads it. A broken unit is left out and reported; the others
// still count.
//
// infoSize is the size of .debug_info: each top-level entry takes at least
// a byte of it, so more steps than that mean debug/dwarf is not advancing
// (it returns empty entries forever on a truncated number at the end of a
// unit) and the walk stops.
func readUnits(d *dwarf.Data, infoSize uint64, vet func(stmtList int64) error) (*dwarfInfo, error) {
	t := &lineTable{}
	dw := &dwarfInfo{data: d, lineTab: t, infoSize: infoSize}
	fileIndex := map[*dwarf.LineFile]int32{}
	nameIndex := map[string]int32{}
	intern := func(f *dwarf.LineFile) int32 {
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
	var errs []error
	unitErr := func(err error) {
		if len(errs) < maxUnitErrors {
			errs = append(errs, err)
		}
	}

	r := d.Reader()
	for steps := uint64(0); ; steps++ {
		if steps > infoSize {
			unitErr(errors.New("compile units: reader does not advance"))
			break
		}
		cu, err := r.Next()
		if err != nil {
			unitErr(fmt.Errorf("read compile unit: %w", err))
			break
		}
		if cu == nil {
			break
		}
		r.SkipChildren()
		if cu.Tag != dwarf.TagCompileUnit && cu.Tag != dwarf.TagPartialUnit {
			continue
		}
		linesOK := true
		if off, ok := cu.Val(dwarf.AttrStmtList).(int64); ok {
			if err := vet(off); err != nil {
				unitErr(fmt.Errorf("line program at %#x: %w", off, err))
				linesOK = false
			}
		}
		dw.addUnit(cu, linesOK)
		if !linesOK {
			continue
		}
		lr, err := d.LineReader(cu)
		if err != nil {
			unitErr(fmt.Errorf("line program of unit %#x: %w", cu.Offset, err))
			continue
		}
		if lr == nil {
			continue // a unit without line information
		}
		mark := len(t.rows)
		if err := t.addUnit(lr, intern); err != nil {
			t.rows = t.rows[:mark] // a half-read unit could claim addresses it never ends
			unitErr(fmt.Errorf("line program of unit %#x: %w", cu.Offset, err))
			if errors.Is(err, errTooManyRows) {
				break
			}
		}
	}
	t.sort()
	dw.sortUnits()
	return dw, errors.Join(errs...)
}

// addUnit appends one unit's rows. Rows keep their program order (stable
// sort later), so of several rows at one address the last one, which owns
// the instruction bytes, wins.
func (t *lineTable) addUnit(lr *dwarf.LineReader, intern func(*dwarf.LineFile) int32) error {
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
		if len(t.rows) >= maxLineRows {
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
