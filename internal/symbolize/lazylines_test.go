package symbolize

import (
	"debug/elf"
	"fmt"
	"os"
	"testing"
)

// Lookups in the unit read on demand give what one table of all rows
// gives, at every row's address and around it: in a fixture built with
// each DWARF version, and in libc's debug file when libc6-dbg is installed.
func TestLazyLinesMatchTable(t *testing.T) {
	for _, path := range lazyTestFiles(t) {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dw, err := readDWARF(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if dw.lineTab != nil || len(dw.lineSeqs) == 0 {
			t.Fatalf("%s: one table read eagerly, want units on demand", path)
		}
		all := dw.allLines()
		t.Logf("%s: %d rows in %d sequences", path, len(all.rows), len(dw.lineSeqs))
		for _, row := range all.rows {
			for _, a := range []uint64{row.addr - 1, row.addr, row.addr + 1} {
				wf, wl := all.lookup(a)
				if gf, gl := dw.lineAt(a); gf != wf || gl != wl {
					t.Fatalf("%s: lineAt(%#x) = %s:%d, the table gives %s:%d", path, a, gf, gl, wf, wl)
				}
			}
		}
	}
}

// lazyTestFiles builds a fixture with each DWARF version, and adds libc's
// debug file when libc6-dbg is installed.
func lazyTestFiles(t *testing.T) []string {
	needTool(t, "gcc")
	dir := tempDir(t)
	var files []string
	for _, v := range []string{"-gdwarf-4", "-gdwarf-5"} {
		files = append(files, buildFixture(t, dir, "leak"+v, "-O2", v))
	}
	if f, err := elf.Open(libcPath); err == nil {
		id := buildID(f)
		f.Close()
		libc := DefaultDebugDir + "/.build-id/" + id[:min(2, len(id))] + "/" + id[min(2, len(id)):] + ".debug"
		if _, err := os.Stat(libc); id != "" && err == nil {
			files = append(files, libc)
		}
	}
	return files
}

func TestSeqsApart(t *testing.T) {
	tests := []struct {
		name       string
		prev, next lineSeq
		want       bool
	}{
		{"below", lineSeq{lo: 0x10, hi: 0x20, unit: 1}, lineSeq{lo: 0x30, hi: 0x40}, true},
		{"end meets start", lineSeq{lo: 0x10, hi: 0x20, unit: 1}, lineSeq{lo: 0x20, hi: 0x40, loCode: true}, true},
		{"inside", lineSeq{lo: 0x10, hi: 0x40}, lineSeq{lo: 0x20, hi: 0x30, unit: 1}, false},
		{"code at the end, later unit next", lineSeq{lo: 0x10, hi: 0x20, hiCode: true}, lineSeq{lo: 0x20, hi: 0x30, unit: 1, loCode: true}, true},
		{"code at the end, earlier unit next", lineSeq{lo: 0x10, hi: 0x20, unit: 1, hiCode: true}, lineSeq{lo: 0x20, hi: 0x30, loCode: true}, false},
		{"code at the end, next starts with an end", lineSeq{lo: 0x10, hi: 0x20, hiCode: true}, lineSeq{lo: 0x20, hi: 0x20, unit: 1}, false},
	}
	for _, tc := range tests {
		if got := seqsApart(tc.prev, tc.next); got != tc.want {
			t.Errorf("%s: seqsApart = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Sequences that interleave make one table of all rows.
func TestInterleavedSequencesMakeOneTable(t *testing.T) {
	needTool(t, "gcc")
	bin := buildFixture(t, tempDir(t), "leak", "-O2", "-g")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dw, err := readDWARF(f)
	if err != nil {
		t.Fatal(err)
	}
	want := dw.allLines()
	dw.indexLines([]lineSeq{{lo: 0x10, hi: 0x40}, {lo: 0x20, hi: 0x30}})
	if dw.lineTab == nil || dw.lineUnits != nil {
		t.Fatal("interleaved sequences: no single table")
	}
	for _, row := range want.rows {
		wf, wl := want.lookup(row.addr)
		if gf, gl := dw.lineAt(row.addr); gf != wf || gl != wl {
			t.Fatalf("lineAt(%#x) = %s:%d, want %s:%d", row.addr, gf, gl, wf, wl)
		}
	}
}

// Units opened on demand give the lines and inline chains that all units
// opened at once give, at addresses spread over libc's debug file (which
// opens more units than maxOpenUnits on the way) and a fixture's.
func TestLazyUnitsMatchEager(t *testing.T) {
	files := lazyTestFiles(t)
	for _, path := range files {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		lazy, err1 := readDWARFUnits(f, true)
		eager, err2 := readDWARFUnits(f, false)
		if fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("%s: errors %v, eager %v", path, err1, err2)
		}
		if !lazy.src.lazy() {
			t.Fatalf("%s: all units opened at once", path)
		}
		rows := eager.lines().rows
		step := max(1, len(rows)/3000)
		for i := 0; i < len(rows); i += step {
			a := rows[i].addr
			wf, wl := eager.lineAt(a)
			gf, gl := lazy.lineAt(a)
			if gf != wf || gl != wl {
				t.Fatalf("%s: lineAt(%#x) = %s:%d, eager %s:%d", path, a, gf, gl, wf, wl)
			}
			if got, want := chainAt(lazy, a, wf, wl), chainAt(eager, a, wf, wl); got != want {
				t.Fatalf("%s: chain at %#x = %s, eager %s", path, a, got, want)
			}
		}
	}
}

func chainAt(dw *dwarfInfo, pc uint64, file string, line int) string {
	u, node := dw.inlineAt(pc)
	if u == nil {
		return ""
	}
	return fmt.Sprint(u.chain(node, file, line, "f"))
}
