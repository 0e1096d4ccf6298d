// Package selfmem is memtrace's own memory: what it reads of its resident
// set (/proc/self/status), the soft limit it gives the Go runtime, and a
// heap profile on demand (MEMTRACE_MEMPROFILE) to find where it goes.
package selfmem

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"github.com/memtrace/memtrace/internal/procfs"
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
	found, err := procfs.StatusFields(b, map[string]*uint64{"VmHWM": &u.PeakRSS, "VmRSS": &u.RSS})
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

// Limiter keeps the Go runtime's soft memory limit (debug.SetMemoryLimit)
// at what memtrace needs: a floor for its fixed part, plus its live heap
// (mostly the live table, which grows with the traced blocks) and an
// eighth of that for garbage, plus what a task about to start will
// hold. The Go runtime otherwise lets its heap grow to twice the live
// heap before it collects (GOGC=100): hundreds of MB with millions of
// live blocks. A limit below the live heap costs CPU (the collector runs
// more often, and at most half of the time), never correctness. A user's
// GOMEMLIMIT turns it off.
type Limiter struct {
	floor uint64
	off   bool
	// stopped ends Follow's chain of collections.
	stopped atomic.Bool
	mu      sync.Mutex
	limit   uint64
	// reserved is what the last Update asked for: after a collection
	// the limit only ever rises above it.
	reserved uint64
	live     []metrics.Sample
}

// NewLimiter returns a limiter with the given floor (bytes).
func NewLimiter(floor uint64) *Limiter {
	return &Limiter{floor: floor, off: os.Getenv(limitEnv) != "",
		live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// Update sets the limit from the live heap of the last collection, with
// extra bytes more for a task about to allocate them; it returns the
// limit in force, 0 when GOMEMLIMIT rules.
func (l *Limiter) Update(extra uint64) uint64 {
	if l == nil || l.off {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.readLive()
	l.reserved = l.floor + live + live/8 + extra
	return l.set(l.reserved)
}

// Follow has the limit follow the live heap after every collection, from
// the first Update on, until Stop. Between two Updates the live heap may
// grow well past what the last one saw (a report reads symbol tables and
// debug files, a leak check builds its graph): with the limit left where
// it was, the collector ran back to back (node -e 0's report: 30
// collections in a quarter of a second, the goal at the live heap).
func (l *Limiter) Follow() {
	if l == nil || l.off {
		return
	}
	l.arm()
}

// Stop ends Follow.
func (l *Limiter) Stop() {
	if l != nil {
		l.stopped.Store(true)
	}
}

// sentinel is an object only the collector's cleanup refers to: it dies
// in the first collection after it is made. It holds a pointer so that the
// tiny allocator, whose blocks die together, does not take it.
type sentinel struct {
	_ *int
	_ [8]byte
}

// arm runs afterGC once the next collection is over, and arms again.
func (l *Limiter) arm() {
	runtime.AddCleanup(new(sentinel), func(struct{}) {
		if l.stopped.Load() {
			return
		}
		l.afterGC()
		l.arm()
	}, struct{}{})
}

// afterGC raises the limit to the floor and the live heap with an eighth
// more, when that is above what the last Update reserved.
func (l *Limiter) afterGC() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit == 0 {
		return // no Update yet: the runtime's default rules
	}
	live := l.readLive()
	l.set(max(l.reserved, l.floor+live+live/8))
}

func (l *Limiter) readLive() uint64 {
	metrics.Read(l.live)
	if l.live[0].Value.Kind() == metrics.KindUint64 {
		return l.live[0].Value.Uint64()
	}
	return 0
}

// set makes want the runtime's limit, unless it is within 1/16 of the
// one in force: only larger moves are worth a call.
func (l *Limiter) set(want uint64) uint64 {
	if d := int64(want - l.limit); l.limit == 0 || d > int64(l.limit/16) || -d > int64(l.limit/16) {
		l.limit = want
		debug.SetMemoryLimit(int64(min(want, math.MaxInt64)))
	}
	return l.limit
}
