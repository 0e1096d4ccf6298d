package session

import (
	"fmt"
	"os"
	"time"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/tracer"
)

// timeState is the session's part about time: the recording (--record),
// marks (--mark) and numbered dumps (--dump-dir).
type timeState struct {
	rec   *recording.Writer
	dumps *pipeline.Dumps
	// accessRecords: access epochs ended since the last dump (access.go).
	accessRecords []accessDumped
}

// openTime creates the recording file before the run starts, so that a
// path that cannot be written fails at once.
func (s *session) openTime(args []string) error {
	s.time = &timeState{}
	if s.cfg.DumpDir != "" {
		s.time.dumps = &pipeline.Dumps{Dir: s.cfg.DumpDir, Sort: s.cfg.Sort, Host: s.cfg.Host(), Extra: s.dumpAccess}
	}
	if s.cfg.Record == "" {
		return nil
	}
	host, _ := os.Hostname()
	info := recording.Info{Start: time.Now(), StartNS: monotonicNow(), Hostname: host, Args: args, Mode: pipeline.Mode(s.cfg.PIDs, s.cfg.Command),
		SampleBytes: s.cfg.SampleBytes, Detail: s.cfg.Detail, StackDepth: s.cfg.StackDepth, Marks: s.cfg.Marks,
		ResidentOnly: s.cfg.Host() && !s.cfg.Heap}
	// The leak check's settings: a replay's defaults (pipeline.LeakConfig.RecordedLeakSettings).
	s.cfg.RecordedLeakSettings(&info)
	if k, err := tracer.ProbeKernel(); err == nil { // probed once per process: what load uses
		info.Kernel, info.Attach = k.Release, string(k.AttachFor(s.cfg.SampleBytes))
	}
	w, err := recording.Create(s.cfg.Record, info)
	if err != nil {
		return fmt.Errorf("--record: %w", err)
	}
	s.time.rec = w
	return nil
}

// startTime hooks the recording to the new table and resolver; newState
// calls it before the table gets its first input.
func (s *session) startTime() {
	if s.time == nil {
		s.time = &timeState{}
	}
	if w := s.time.rec; w != nil {
		s.pr.Rec = w // each report's moment, for a replay to print it there
		s.table.SetObserver(w)
		s.table.SetSampleBytes(s.table.SampleBytes()) // set before the observer: now recorded too
		w.SetMaps(s.res.CodeMappings)
		w.SetPython(s.res.PythonFrameOf) // python.go
		w.SetJIT(s.res.JITSymbolsFrom)
		s.res.OnChange(w.MapsChanged)
		w.SetRefresh(s.captureTargets)
	}
	s.table.SetPeakTolerance(s.cfg.PeakTol)
}

// captureTargets reads the targets' mappings again, so that the recording
// holds what symbolizes their call sites even if the run is killed.
func (s *session) captureTargets() {
	for pid, t := range s.targets {
		if !t.exited {
			_ = s.res.Capture(pid)
		}
	}
}

// closeTime writes the last dump (when the run ended well) and ends the
// recording, after the final report.
func (s *session) closeTime(ok bool) error {
	if s.time == nil {
		return nil
	}
	if ok && s.time.dumps != nil && s.table != nil {
		if err := s.dump(true); err != nil {
			return fmt.Errorf("--dump-dir: %w", err)
		}
	}
	if s.time.rec == nil {
		return nil
	}
	w := s.time.rec
	if s.table != nil {
		if p, ok := pipeline.PeakOf(s.table); ok {
			w.SetPeak(p) // replay --at peak reads it first (recording.Peak)
		}
	}
	err := w.Close()
	s.log.Info("recording", "file", s.cfg.Record, "events", w.Events, "err", err)
	if err != nil {
		return fmt.Errorf("--record: %w", err)
	}
	return nil
}

// markProbes are the probes of the --mark functions found in mods. Each
// one's attach cookie is FuncMark plus the function's index.
func (s *session) markProbes(pid int, mods []allocator.Module) []allocator.Probe {
	probes, missing := s.bindMarks(mods)
	for _, name := range missing {
		s.log.Warn("--mark: function not found in the process's modules", "pid", pid, "function", name)
	}
	return probes
}

// bindMarks finds the --mark functions in mods (allocator.BindMarks).
func (s *session) bindMarks(mods []allocator.Module) (probes []allocator.Probe, missing []string) {
	return allocator.BindMarks(mods, s.cfg.Marks)
}

// onMark accounts a mark: the table lists it, --json prints it at once,
// and it ends a dump's epoch.
func (s *session) onMark(e *event.Event) {
	label := pipeline.MarkLabel(e, s.cfg.Marks)
	if s.host != nil {
		s.hostSeen(e.PID) // its first event may be a mark (host.go)
	}
	if s.time.rec != nil {
		_ = s.res.Capture(int(e.PID)) // a mark is flushed at once: with what symbolizes it
	}
	s.feed(pipeline.Input{Kind: pipeline.InMark, PID: e.PID, Label: label, Time: e.Time})
	m := s.input.Mark
	s.exportMark(m) // --html's history (exports.go)
	if s.cfg.JSON {
		if err := report.WriteMark(s.out, m); err != nil {
			s.log.Warn("write mark", "err", err)
		}
	}
	s.accessOnMark(e.PID) // a mark ends an access epoch (access.go)
	if s.time.dumps != nil {
		if err := s.dump(false); err != nil {
			s.log.Warn("--dump-dir", "err", err)
		}
	}
}

// recordStacks gives the recording the stacks (--detail, sampled mode),
// from the run's store; load calls it.
func (s *session) recordStacks() {
	if s.time != nil && s.time.rec != nil && s.cfg.takesStacks() {
		s.time.rec.SetStacks(func(id int32) ([]uint64, error) { return s.stacks.Get(id), nil })
	}
}
