package session

import (
	"os"

	"github.com/memtrace/memtrace/internal/selfmem"
	"github.com/memtrace/memtrace/internal/tracer"
)

// memtrace's own memory (docs/memory.md): the Go runtime's soft limit,
// kept at what the run needs, and the resident memory it reports.

// limitFloor is the limit's fixed part: memtrace's Go memory beside the
// live table (symbols, the decoder, the reports) in a small run.
const limitFloor = 16 << 20

// limitMemory starts the soft limit from the ring's and the unwind
// tables' sizes: a quarter of the ring for the events in flight through
// the decoder and the loop, two bytes a row for the unwind tables built
// in Go before they are loaded into their maps.
func (s *session) limitMemory(o tracer.Options) {
	rows := uint64(o.UnwindRows)
	if rows == 0 {
		rows = tracer.DefaultUnwindRows
	}
	floor := limitFloor + uint64(o.RingBytes)/4 + 2*rows
	s.mem = selfmem.NewLimiter(floor)
	s.mem.Follow() // the live heap past the loop's Updates (selfmem)
	// The loop sets it (Update), once probes are placed and the command
	// runs: a limit from the live heap of now would make the collector
	// run over and over while the unwind tables are built.
	if os.Getenv("GOMEMLIMIT") == "" {
		s.log.Info("go memory limit", "floor_bytes", floor)
	} else {
		s.log.Info("go memory limit: GOMEMLIMIT rules")
	}
}

// leakCheckBytes is about what a leak check holds per block beside the
// table (pipeline's 16-byte blocks, leakcheck's index, states, graph, and
// the judge's site indices): the limit makes room for it before the check
// starts, so that the collector does not run over and over while the
// check builds what it keeps anyway.
const leakCheckBytes = 24

// limitForLeakCheck raises the limit for a check of pid.
func (s *session) limitForLeakCheck(pid int) {
	s.mem.Update(uint64(s.table.LiveCount(uint32(pid))) * leakCheckBytes)
}

// selfMemory is memtrace's peak and current resident memory, for the
// report line (report.SelfMemory).
type selfMemory struct{}

func (selfMemory) Resident() (peakRSS, rss uint64) {
	u, err := selfmem.Read()
	if err != nil {
		return 0, 0
	}
	return u.PeakRSS, u.RSS
}

// logMemory logs (-v) memtrace's own memory at the end of the run, and
// writes a heap profile if MEMTRACE_MEMPROFILE asks for one.
func (s *session) logMemory() {
	if err := selfmem.Profile("end"); err != nil {
		s.log.Warn("heap profile", "err", err)
	}
	u, err := selfmem.Read()
	if err != nil {
		s.log.Warn("memtrace memory", "err", err)
		return
	}
	s.log.Info("memtrace memory", "peak_rss_bytes", u.PeakRSS, "rss_bytes", u.RSS)
}
