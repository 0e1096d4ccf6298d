package session

import (
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/footprint"
	"github.com/memtrace/memtrace/pipeline"
)

// footprintEvery is how often the --html timeline gets a footprint
// reading; reports and --listen's refreshes take their own.
const footprintEvery = time.Second

// footprintDuty bounds what readings cost: a process is read again only
// once footprintDuty times its last reading's duration has passed (the
// latest reading stands in meanwhile), so readings take at most 1% of a
// core per process, however many mappings or resident pages it has. The
// final report always reads afresh.
const footprintDuty = 100

// readFootprints gives every process of snap a footprint reading: a fresh
// one while it runs (or, within footprintDuty of the last, that one), the
// one taken at its exit stop once it has exited, else its latest. A
// process that cannot be read (it just exited, a zombie) keeps its latest
// reading, if any, and says so at debug level.
func (s *session) readFootprints(snap *aggregate.Snapshot, fresh bool) {
	for i := range snap.Processes {
		p := &snap.Processes[i]
		pid := int(p.PID)
		if r, ok := s.exitFootprints[pid]; ok {
			p.SetFootprint(r)
			continue
		}
		last, ok := s.lastFootprints[pid]
		if p.Exited || (ok && !fresh && time.Since(last.at) < footprintDuty*last.took) {
			s.lastFootprint(p)
			continue
		}
		start := time.Now()
		r, err := footprint.Read(pid, s.footprintOptions(pid, p.Regions))
		if err != nil {
			s.log.Debug("footprint", "pid", pid, "err", err)
			s.lastFootprint(p)
			continue
		}
		r.Attached = s.host != nil || slices.Contains(s.cfg.PIDs, pid)
		p.SetFootprint(r)
		if s.lastFootprints == nil {
			s.lastFootprints = map[int]lastReading{}
		}
		s.lastFootprints[pid] = lastReading{r: r, regions: p.Regions, at: start, took: time.Since(start)}
		s.recordFootprint(pid, r, p.Regions)
	}
}

// recordFootprint writes a fresh reading to the --record file, so that a
// replay shows the footprint the live run showed.
func (s *session) recordFootprint(pid int, r footprint.Reading, regions []footprint.Range) {
	if s.time != nil && s.time.rec != nil {
		s.time.rec.Footprint(uint32(pid), monotonicNow(), r, regions)
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
	r, err := footprint.Read(pid, s.footprintOptions(pid, snap.Processes[0].Regions))
	if err != nil {
		s.log.Warn("footprint at exit", "pid", pid, "err", err)
		return
	}
	if s.exitFootprints == nil {
		s.exitFootprints = map[int]footprint.Reading{}
	}
	s.exitFootprints[pid] = r
	s.recordFootprint(pid, r, snap.Processes[0].Regions)
}

// lastReading is a process's latest footprint and the regions it split.
type lastReading struct {
	r       footprint.Reading
	regions []footprint.Range
	at      time.Time     // when it was taken
	took    time.Duration // how long it took
}

// lastFootprint gives a process its latest reading, when it is not read
// afresh (it exited, or was read within footprintDuty); a region made or
// cut since has no state. Whole host drops it when the process is
// (hostExit).
func (s *session) lastFootprint(p *aggregate.ProcessSnapshot) {
	if last, ok := s.lastFootprints[int(p.PID)]; ok {
		p.SetFootprint(pipeline.Aligned(last.r, last.regions, p.Regions))
	}
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
