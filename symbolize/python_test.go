package symbolize

import (
	"encoding/hex"
	"testing"
)

// TestPythonLineTables decodes the line tables CPython wrote for one
// function (testdata: sample() of a script run on each version, with its
// lines as co_lines and co_positions give them, 0 for none), one
// instruction at a time.
func TestPythonLineTables(t *testing.T) {
	tests := []struct {
		version string
		minor   int
		first   int
		table   string
		lines   []int
	}{
		{"3.10", 10, 2, "04010c010c010e010a0212010802", []int{3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 11, 11, 11}},
		{"3.11", 11, 2, "8000d80c0d8045dd0d12903189588c58f000040517f0000405178801d80b0c8871893590418a3a883ad80c11905198119155894e88458845e00c119051894a88458845f002010c16f000010c169575985191789478f000010c16f100010c16f400010c168044e00b109024883bd00416", []int{2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 11, 11, 11}},
		{"3.12", 12, 2, "8000d80c0d8045dc0d1290318b58f2000405178801d80b0c8871893590418a3ad80c11905198119155894e8945e00c119051894a8945f009040517f40a00181d98519378f600010c169021d80f1090318a75f203000d0ef000010c168044f000010c16e00b109024883bd00416f9f205010c16", []int{2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 8, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 9, 9, 9, 9, 9, 9, 11, 11, 11, 11, 0, 0, 9, 9, 9}},
		{"3.13", 13, 2, "8000d80c0d8045dc0d1290318e588801d80b0c8871893590418b3ad80c1198119155894e8a45e00c119051894a8a45f109000e16f40a00181d98519478f300010c1691789021d80f1090318975f703000d0e91788044f000010c16e00b10883bd00416f9f205010c16", []int{2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 8, 8, 8, 8, 8, 8, 8, 4, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 11, 11, 0, 0, 9, 9, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			tab, err := hex.DecodeString(tt.table)
			if err != nil {
				t.Fatal(err)
			}
			c := &pyCode{firstLine: tt.first, table: tab}
			for i, want := range tt.lines {
				if got := c.line(tt.minor, uint32(i)); got != want {
					t.Errorf("instruction %d: line %d, want %d", i, got, want)
				}
			}
		})
	}
}
