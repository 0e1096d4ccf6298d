package procfs

import (
	"os"
	"testing"
)

// TestParseRollupPSS: smaps_rollup's Pss line, whichever line it is on.
func TestParseRollupPSS(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		err  bool
	}{
		{"55f0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:  300 kB\nPss:  120 kB\nPss_Anon: 100 kB\n", 120 << 10, false},
		{"Pss_Anon: 100 kB\n", 0, true},
		{"Pss: lots\n", 0, true},
		{"", 0, true},
	} {
		got, err := ParseRollupPSS([]byte(c.in))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseRollupPSS(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// TestReadRollupPSS: this process has resident pages of its own.
func TestReadRollupPSS(t *testing.T) {
	pss, err := ReadRollupPSS(os.Getpid())
	if err != nil || pss == 0 {
		t.Fatalf("ReadRollupPSS(self) = %d, %v; want > 0", pss, err)
	}
}
