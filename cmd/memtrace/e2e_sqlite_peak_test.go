package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSqlitePeakNamed: on Debian's sqlite3, whose libsqlite3 is stripped
// down to its exported names, at most 5% of the bytes live at the peak, and
// of the bytes allocated, are charged to code without a name. The page
// cache reaches sqlite3Malloc through unnamed static functions, its named
// caller up to 11 frames above malloc's caller;
// before the walk followed such chains past 8 frames, 73% of the peak of
// testdata/sqlite/workload.sql (13788853 of 18915006 bytes) and 49% of
// pcache.sql's went to unnamed calls in it, mostly one. The peak's call
// sites must add up to the peak snapshot.
func TestSqlitePeakNamed(t *testing.T) {
	needBPF(t)
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but sqlite3 is missing: .ci/run must install the Debian package sqlite3")
		}
		t.Skip("sqlite3 not installed (Debian package sqlite3)")
	}
	for _, script := range []string{"workload.sql", "pcache.sql"} {
		t.Run(script, func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join("..", "..", "testdata", "sqlite", script))
			if err != nil {
				t.Fatal(err)
			}
			// The report goes to a file: sqlite3 shares memtrace's stdout.
			out := filepath.Join(t.TempDir(), "report.ndjson")
			r := runMemtrace(t, "--json", "--top", "0", "-o", out, "--", sqlite, "-batch", ":memory:", ".read '"+path+"'")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var peak peakRecord
			var peaks int
			var atPeak, sites shareOfUnnamed
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				var s siteRecord
				if err := json.Unmarshal(line, &s); err != nil {
					t.Fatalf("%v: %q", err, line)
				}
				switch {
				case s.Type == "peak":
					peaks++
					if err := json.Unmarshal(line, &peak); err != nil {
						t.Fatal(err)
					}
				case s.Type == "peak_callsite" && s.Category == "heap":
					atPeak.add(s, s.LiveBytes)
				case s.Type == "callsite" && s.Category == "heap" && s.Final:
					sites.add(s, s.AllocBytes)
				}
			}
			if peaks != 1 || peak.LiveBytes == 0 {
				t.Fatalf("%d peak records (%+v), want one with live bytes", peaks, peak)
			}
			if atPeak.all != peak.LiveBytes {
				t.Errorf("the peak's call sites hold %d live bytes, the peak record %d", atPeak.all, peak.LiveBytes)
			}
			t.Logf("at the peak: %d of %d live bytes unnamed (%.3f%%); over the run: %d of %d bytes allocated (%.3f%%)",
				atPeak.unnamed, atPeak.all, atPeak.percent(), sites.unnamed, sites.all, sites.percent())
			if atPeak.percent() > 5 {
				t.Errorf("%.2f%% of the peak's live bytes are charged to unnamed code, want at most 5%%", atPeak.percent())
			}
			if sites.percent() > 5 {
				t.Errorf("%.2f%% of the bytes allocated are charged to unnamed code, want at most 5%%", sites.percent())
			}
		})
	}
}

// peakRecord is the NDJSON "peak" record's figures.
type peakRecord struct {
	LiveBytes      uint64 `json:"live_bytes"`
	PeakLiveBytes  uint64 `json:"peak_live_bytes"`
	ToleranceBytes uint64 `json:"tolerance_bytes"`
}

// shareOfUnnamed sums bytes over call sites, and those of sites without a
// function name.
type shareOfUnnamed struct{ all, unnamed uint64 }

func (u *shareOfUnnamed) add(s siteRecord, bytes uint64) {
	u.all += bytes
	if s.Function == "" {
		u.unnamed += bytes
	}
}

func (u shareOfUnnamed) percent() float64 {
	if u.all == 0 {
		return 0
	}
	return 100 * float64(u.unnamed) / float64(u.all)
}
