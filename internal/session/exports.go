package session

import (
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/metrics"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/recording"
)

// Exports: files written at the end of a run (--pprof, --folded, --html)
// and the HTTP endpoint served while it runs (--listen), from snapshots
// of the table (pipeline.Exports). The session calls startExports once
// the table exists, exportEvent with every event, exportTick every rate
// period and writeExports at the end.

// ExportConfig holds the flags of the exports.
type ExportConfig struct {
	ExportFiles
	Listen       string
	ListenPublic bool
}

// startExports starts the --listen endpoint; stop ends it.
func (s *session) startExports() (stop func(), err error) {
	src := pprofout.Sources{Symbolizer: s.res, Mappings: s.res}
	if s.cfg.takesStacks() { // whole stacks: --detail's sites, sampled mode's breakdown
		src.Stacks = s.stackSource()
	}
	s.exports = pipeline.NewExports(&s.cfg.ExportFiles, src, s.host != nil)
	if s.cfg.Listen == "" {
		return func() {}, nil
	}
	return s.exports.Serve(s.cfg.Listen, s.cfg.ListenPublic, metrics.Options{Top: s.cfg.Top,
		Cgroup: func(pid uint32) string { return host.Cgroup(int(pid)) }}, s.snapshotAt(monotonicNow(), false), s.log)
}

// exportTick runs every rate period, with the period's end: the endpoint
// gets a fresh snapshot every so often.
func (s *session) exportTick(now uint64) {
	if s.exports == nil {
		return
	}
	s.historyTick(now)
	if s.exports.MetricsDue() {
		s.exports.UpdateMetrics(s.freshSnapshot(false))
	}
}

// historyTick gives the --html history a point at every tick of the
// table's rates (the recording has each one: a replay samples there too).
func (s *session) historyTick(now uint64) {
	if s.exports == nil || s.exports.History == nil {
		return
	}
	snap := s.pr.Bare(recording.Report{Time: now, All: true})
	if s.exports.FootprintDue(pipeline.FootprintEvery) {
		s.footprints.Read(&snap, false) // the timeline's heap resident
	} else {
		s.footprints.ReadChanged(&snap) // and of a heap that grew or shrank since
	}
	s.exports.Sample(now, snap, s.table)
}

// exportApplied hands the exports every event once the table has it.
func (s *session) exportApplied(e *event.Event) {
	if s.exports != nil {
		s.exports.Applied(e, s.table)
	}
}

// exportEvent hands the exports every event before the table gets it.
func (s *session) exportEvent(e *event.Event) {
	if s.exports != nil {
		s.exports.Event(e)
	}
}

// exportExited folds processes that exited into --pprof and --folded.
func (s *session) exportExited(procs []aggregate.ProcessSnapshot) {
	if s.exports != nil {
		s.exports.ExitedProcs(procs)
	}
}

// exportMark gives the --html history a mark, so the page draws it.
func (s *session) exportMark(m aggregate.Mark) {
	if s.exports != nil {
		s.exports.Mark(m, s.table)
	}
}

// writeExports writes the export files from the final snapshot.
func (s *session) writeExports() error {
	if !s.cfg.ExportFiles.Any() {
		return nil
	}
	snap := s.freshSnapshot(false) // after the final report: its readings
	return pipeline.WriteExportFiles(&s.cfg.ExportFiles, s.exports.History, snap, s.exports.Sources(), pipeline.ExportEnd{
		Title: pipeline.Title(s.cfg.PIDs, s.cfg.Command), Start: s.exports.Start, Time: time.Now(),
		NS: monotonicNow(), Blocks: s.table, Exited: s.exports.Exited})
}

// freshSnapshot is the table as of now, refreshed (refresh); final: the
// footprint readings are fresh (footprint.go).
func (s *session) freshSnapshot(final bool) aggregate.Snapshot {
	return s.snapshotAt(s.refresh(), final)
}

// snapshotAt is the live run's snapshot of every process at now: the
// printer builds it (printer.snapshot), as it builds every report's.
func (s *session) snapshotAt(now uint64, final bool) aggregate.Snapshot {
	return s.pr.Snapshot(recording.Report{Time: now, All: true, Final: final})
}

// refresh gives the table the probes' counts (refreshCounts) and brings
// the rates up to now, which it returns.
func (s *session) refresh() uint64 {
	s.refreshCounts()
	now := monotonicNow()
	s.feed(pipeline.Input{Kind: pipeline.InTick, Time: now}) // rates up to now (live.go)
	s.historyTick(now)
	return now
}

// refreshCounts gives the table, as inputs, what the probes count
// without events: lost events, and sampled mode's exact counts.
func (s *session) refreshCounts() {
	s.refreshLost()
	s.setExactCounts() // host.go
}

// refreshLost gives the table the probes' lost-event counts.
func (s *session) refreshLost() {
	if per, total, err := s.objs.Lost(); err == nil {
		for pid, n := range per {
			s.feed(pipeline.Input{Kind: pipeline.InLost, PID: pid, N: n})
		}
		s.feed(pipeline.Input{Kind: pipeline.InTotalLost, N: total})
	}
}
