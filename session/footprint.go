package session

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/footprint"
	"github.com/memtrace/memtrace/pipeline"
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
// and whether its malloc is glibc's, whose mappings are then recognized
// by their headers. Whole host, the reading decides from the files the
// process maps.
func (s *session) footprintOptions(pid int, regions []footprint.Range) footprint.Options {
	if t := s.targets[pid]; t != nil && t.malloc != "" {
		return footprint.Options{Ranges: regions, Glibc: isGlibc(t.malloc)}
	}
	return footprint.Options{Ranges: regions, Detect: true}
}

// mallocModule is the module malloc binds to among probes.
func mallocModule(probes []allocator.Probe) string {
	for _, p := range probes {
		if p.Func == event.FuncMalloc {
			return p.Module
		}
	}
	return ""
}

func isGlibc(module string) bool {
	return strings.HasPrefix(filepath.Base(module), "libc.so")
}
