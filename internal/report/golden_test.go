package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden pins whole reports, text layout included, so any change to
// what users see or parse shows up as a diff in review. Regenerate with
//
//	go test ./report/ -run TestGolden -update
func TestGolden(t *testing.T) {
	tests := []struct {
		file string
		o    Options
		json bool
	}{
		{"two_sites.txt", Options{Top: DefaultTop}, false},
		{"periodic_lost.txt", Options{Top: DefaultTop}, false},
		{"final_raw_top2_allocs.txt", Options{Top: 2, Sort: SortAllocs, Final: true, Raw: true}, false},
		{"periodic.ndjson", Options{Top: DefaultTop}, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := periodicSnapshot()
			if tt.file == "two_sites.txt" {
				s = snapshotOf(0, twoSiteProcess())
			}
			var b bytes.Buffer
			write := WriteText
			if tt.json {
				write = WriteJSON
			}
			if err := write(&b, s, fixtureSymbols, tt.o); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, b.Bytes())
		})
	}
}

// checkGolden compares got with testdata/file, or rewrites the file with
// -update.
func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update if intended):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
