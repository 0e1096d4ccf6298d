package selfmem

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
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

func TestLimiter(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv(limitEnv, "")
	os.Unsetenv(limitEnv)
	runtime.GC()
	l := NewLimiter(64 << 20)
	got := l.Update(0)
	if got < 64<<20 || got > 1<<30 || debug.SetMemoryLimit(-1) != int64(got) {
		t.Errorf("Update(0) = %d, runtime limit %d: want the floor and the live heap", got, debug.SetMemoryLimit(-1))
	}
	// A task about to allocate 1 GiB moves the limit up by that much.
	if more := l.Update(1 << 30); more < got+1<<30-got/16 || debug.SetMemoryLimit(-1) != int64(more) {
		t.Errorf("Update(1 GiB) = %d after %d", more, got)
	}
	// The user's GOMEMLIMIT wins: the limit in force is left as it is.
	t.Setenv(limitEnv, "1GiB")
	debug.SetMemoryLimit(1 << 30)
	if got := NewLimiter(64 << 20).Update(0); got != 0 || debug.SetMemoryLimit(-1) != 1<<30 {
		t.Errorf("with GOMEMLIMIT set, Update = %d, runtime limit %d; want 0 and the user's", got, debug.SetMemoryLimit(-1))
	}
}

// TestLimiterFollows: after a collection the limit follows a live heap
// grown past what Update saw, never drops below what Update reserved, and
// stays put once stopped.
func TestLimiterFollows(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	os.Unsetenv(limitEnv)
	runtime.GC()
	l := NewLimiter(1 << 20)
	l.Follow()
	defer l.Stop()
	reserved := l.Update(64 << 20) // a task about to allocate 64 MiB
	const grown = 128 << 20
	held := make([]byte, grown)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1
	}
	want := uint64(1<<20 + grown + grown/8)
	testwait.For(t, "the limit to follow the live heap", func() bool {
		runtime.GC()
		return uint64(debug.SetMemoryLimit(-1)) >= want-want/16
	})
	runtime.KeepAlive(held) // held's last use: the collections below free it
	runtime.GC()
	runtime.GC()
	if got := uint64(debug.SetMemoryLimit(-1)); got < reserved {
		t.Errorf("limit %d after the heap shrank, want at least the %d Update reserved", got, reserved)
	}
	l.Stop()
	l.Update(0)
	after := debug.SetMemoryLimit(-1)
	big := make([]byte, grown)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	runtime.GC()
	runtime.GC()
	runtime.KeepAlive(big)
	if got := debug.SetMemoryLimit(-1); got != after {
		t.Errorf("limit moved from %d to %d after Stop", after, got)
	}
}
