// Package testwait lets tests wait for a condition rather than sleep for
// a fixed time: a fixed sleep is too short on a loaded machine (CI runs
// the suite with other work on both cores) and too long on a quiet one.
package testwait

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Limit bounds every wait. It is reached only when the condition never
// comes (the test fails then), so it is generous.
const Limit = 60 * time.Second

// poll is how often a condition is checked.
const poll = 2 * time.Millisecond

// For waits until cond holds; the test fails, naming what, after Limit.
func For(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", Limit, what)
		}
		time.Sleep(poll)
	}
}

// Mapped waits until process pid maps a file whose path contains file
// ("/libc.so"): a process just started runs in the dynamic loader for a
// while before its libraries are there.
func Mapped(tb testing.TB, pid int, file string) {
	tb.Helper()
	For(tb, file+" mapped in process", func() bool {
		maps, err := procfs.ReadMaps(pid)
		if err != nil {
			return false
		}
		// Its code, not only the first segment: the loader maps a
		// library read-only first, then its segments over it, and the
		// allocator's files are found by their executable mappings.
		for _, m := range maps {
			if strings.Contains(m.Path, file) && m.Executable() {
				return true
			}
		}
		return false
	})
}

// Asleep waits until process pid sleeps in nanosleep or clock_nanosleep
// (x86-64's 35 and 230, from /proc/PID/syscall): a `sleep` started for a
// test is then past its dynamic loader, whose mappings change as a
// reader of /proc/PID/maps reads them (a library's text was seen, then
// missed by the next read).
func Asleep(tb testing.TB, pid int) {
	tb.Helper()
	For(tb, "the process asleep", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
		if err != nil {
			return false
		}
		nr, _, _ := strings.Cut(string(b), " ")
		return nr == "35" || nr == "230"
	})
}
