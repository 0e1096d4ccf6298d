package session

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/footprint"
)

// readFootprints gives every process of snap a footprint reading: a fresh
// one while it runs, the one taken at its exit stop once it has exited
// (its memory is gone by the report). A process that cannot be read (it
// just exited, a zombie) keeps none, and says so at debug level.
func (s *session) readFootprints(snap *aggregate.Snapshot) {
	for i := range snap.Processes {
		p := &snap.Processes[i]
		pid := int(p.PID)
		if r, ok := s.exitFootprints[pid]; ok {
			p.SetFootprint(r)
			continue
		}
		if p.Exited {
			continue
		}
		r, err := footprint.Read(pid, footprint.Options{Ranges: p.Regions, Glibc: s.glibcMalloc(pid)})
		if err != nil {
			s.log.Debug("footprint", "pid", pid, "err", err)
			continue
		}
		r.Attached = slices.Contains(s.cfg.PIDs, pid)
		p.SetFootprint(r)
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
	r, err := footprint.Read(pid, footprint.Options{Ranges: snap.Processes[0].Regions, Glibc: s.glibcMalloc(pid)})
	if err != nil {
		s.log.Warn("footprint at exit", "pid", pid, "err", err)
		return
	}
	if s.exitFootprints == nil {
		s.exitFootprints = map[int]footprint.Reading{}
	}
	s.exitFootprints[pid] = r
}

// glibcMalloc reports whether pid's malloc is glibc's, whose mappings are
// then recognized by their headers (footprint.Options.Glibc).
func (s *session) glibcMalloc(pid int) bool {
	if t := s.targets[pid]; t != nil && t.malloc != "" {
		return isGlibc(t.malloc)
	}
	return true
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
