package symbolize

import (
	"debug/elf"
	"os"
	"testing"
)

// Lookups in the unit read on demand give what one table of all rows
// gives, at every row's address and around it: in a fixture built with
// each DWARF version, and in libc's debug file when libc6-dbg is installed.
func TestLazyLinesMatchTable(t *testing.T) {
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
	for _, path := range files {
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
