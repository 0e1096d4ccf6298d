package selfmem

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Usage
		err  bool
	}{
		{"both", "Name:\tmemtrace\nVmPeak:\t  900 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 12 kB\n", Usage{PeakRSS: 2048 << 10, RSS: 1024 << 10}, false},
		{"kernel thread", "Name:\tkthreadd\nState:\tS\n", Usage{}, true},
		{"one missing", "VmRSS:\t  1024 kB\n", Usage{}, true},
		{"not a number", "VmHWM:\t  x kB\nVmRSS:\t 1 kB\n", Usage{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus([]byte(tc.in))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("parseStatus = %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestRead: this process's own figures, the peak at least the current.
func TestRead(t *testing.T) {
	u, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS == 0 || u.PeakRSS < u.RSS {
		t.Errorf("Read = %+v: want 0 < RSS <= PeakRSS", u)
	}
}

func TestSetLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv(limitEnv, "")
	os.Unsetenv(limitEnv)
	if got := SetLimit(300 << 20); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("SetLimit(300 MiB) = %d, runtime limit %d", got, debug.SetMemoryLimit(-1))
	}
	// The user's GOMEMLIMIT wins: the limit in force is left as it is.
	t.Setenv(limitEnv, "1GiB")
	debug.SetMemoryLimit(1 << 30)
	if got := SetLimit(300 << 20); got != 1<<30 {
		t.Errorf("with GOMEMLIMIT set, SetLimit = %d, want the user's %d", got, 1<<30)
	}
}
