package session

import (
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/host"
)

// The whole host's list (report/hostlist.go) holds every process, those
// memtrace met no event of too: each report and each --watch frame adds
// them, with a light reading each (footprint.ReadRollup: status and
// smaps_rollup, never full smaps): tens of microseconds per process,
// milliseconds for one with gigabytes resident (BenchmarkReadRollup),
// paced below.

// rollupDuty paces the readings as pipeline's footprintDuty does: a
// process is read again only once rollupDuty times its last reading's
// duration has passed; a final report reads afresh.
const rollupDuty = 100

// rollups are the latest light readings, by pid.
type rollups map[int]rollupReading

type rollupReading struct {
	r    footprint.Reading
	at   time.Time
	took time.Duration
}

// addOthers adds to snap every process of the host it does not hold that
// passes the filters, memtrace itself and kernel threads excepted, as
// Untraced, with its reading.
func (s *session) addOthers(snap *aggregate.Snapshot, fresh bool) {
	h := s.host
	pids, err := host.PIDs()
	if err != nil {
		s.log.Warn("host list", "err", err)
		return
	}
	held := make(map[uint32]bool, len(snap.Processes))
	for _, p := range snap.Processes {
		held[p.PID] = true
	}
	if h.rollups == nil {
		h.rollups = rollups{}
	}
	alive := make(map[int]bool, len(pids))
	for _, pid := range pids {
		alive[pid] = true
		if pid == h.finder.Self || held[uint32(pid)] || !h.filter.Match(pid) {
			continue
		}
		r, ok := h.rollups.read(pid, fresh)
		if !ok {
			continue // a kernel thread, or gone
		}
		snap.Processes = append(snap.Processes, aggregate.ProcessSnapshot{PID: uint32(pid), Comm: host.Comm(pid), Untraced: true, Footprint: &r})
	}
	for pid := range h.rollups {
		if !alive[pid] {
			delete(h.rollups, pid)
		}
	}
}

// read gives pid's reading: its latest within rollupDuty of it, unless
// fresh, else a new one. false: pid has no memory of its own.
func (rs rollups) read(pid int, fresh bool) (footprint.Reading, bool) {
	if last, ok := rs[pid]; ok && !fresh && time.Since(last.at) < rollupDuty*last.took {
		return last.r, true
	}
	start := time.Now()
	r, err := footprint.ReadRollup(pid)
	if err != nil {
		delete(rs, pid)
		return footprint.Reading{}, false
	}
	rs[pid] = rollupReading{r: r, at: start, took: time.Since(start)}
	return r, true
}
