// Package selfmem is memtrace's own memory: what it reads of its resident
// set (/proc/self/status), the soft limit it gives the Go runtime, and a
// heap profile on demand (MEMTRACE_MEMPROFILE) to find where it goes.
package selfmem

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"

	"github.com/memtrace/memtrace/footprint"
)

// Usage is memtrace's resident memory, as the kernel counts it.
type Usage struct {
	// PeakRSS is the high-water mark of the resident set (VmHWM), in
	// bytes; RSS the resident set now (VmRSS).
	PeakRSS, RSS uint64
}

// Read reads memtrace's own resident memory.
func Read() (Usage, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Usage{}, fmt.Errorf("read own status: %w", err)
	}
	return parseStatus(b)
}

// errNoRSS: a status without VmHWM and VmRSS (a kernel thread's).
var errNoRSS = errors.New("status: no VmHWM and VmRSS")

// parseStatus reads VmHWM and VmRSS from a /proc/PID/status.
func parseStatus(b []byte) (Usage, error) {
	var u Usage
	found, err := footprint.StatusBytes(b, map[string]*uint64{"VmHWM": &u.PeakRSS, "VmRSS": &u.RSS})
	if err != nil {
		return Usage{}, err
	}
	if found != 2 {
		return Usage{}, errNoRSS
	}
	return u, nil
}

// ProfileEnv names the file a heap profile is written to at each Profile
// call (a debugging aid: "go tool pprof -sample_index=inuse_space").
const ProfileEnv = "MEMTRACE_MEMPROFILE"

// Profile writes a heap profile to $MEMTRACE_MEMPROFILE.tag, if set; it
// runs a collection first so that the profile is the live heap.
func Profile(tag string) error {
	path := os.Getenv(ProfileEnv)
	if path == "" {
		return nil
	}
	runtime.GC()
	f, err := os.Create(path + "." + tag)
	if err != nil {
		return fmt.Errorf("write heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write heap profile: %w", err)
	}
	return f.Close()
}

// limitEnv is the Go runtime's own soft limit: a user who sets it is
// obeyed.
const limitEnv = "GOMEMLIMIT"

// SetLimit gives the Go runtime a soft memory limit of bytes (the Go
// heap's and the runtime's own memory; memory mapped outside Go, as the
// BPF ring, is not counted), unless GOMEMLIMIT is set. It returns the
// limit in force.
func SetLimit(bytes int64) int64 {
	if os.Getenv(limitEnv) != "" || bytes <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(bytes)
	return bytes
}
