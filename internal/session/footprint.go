package session

import (
	"slices"

	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/pipeline"
)

// newFootprints is the live run's footprint reader (pipeline.FootprintPacer):
// its readings go to the --record file, so that a replay shows the
// footprint the live run showed.
func (s *session) newFootprints() *pipeline.FootprintPacer {
	return &pipeline.FootprintPacer{
		Options:  s.footprintOptions,
		Attached: func(pid int) bool { return s.host != nil || slices.Contains(s.cfg.PIDs, pid) },
		Record: func(pid int, r footprint.Reading, regions []footprint.Range) {
			if s.time != nil && s.time.rec != nil {
				s.time.rec.Footprint(uint32(pid), monotonicNow(), r, regions)
			}
		},
		Log: s.log,
	}
}

// readExitFootprint reads a process stopped at its exit, when its memory
// is still all there, once every event it wrote is applied.
func (s *session) readExitFootprint(pid int) {
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain at exit", "pid", pid, "err", err)
	}
	snap := s.table.SnapshotOf(uint32(pid))
	if len(snap.Processes) == 0 {
		return
	}
	s.footprints.ReadExit(pid, snap.Processes[0].Regions)
}

// footprintOptions says what a reading of pid needs: its tracked regions
// and its malloc's module, when a target's (whole host: unknown).
func (s *session) footprintOptions(pid int, regions []footprint.Range) footprint.Options {
	malloc := ""
	if t := s.targets[pid]; t != nil {
		malloc = t.malloc
	}
	return footprint.OptionsFor(malloc, regions)
}
