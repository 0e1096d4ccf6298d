package session

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/history"
	"github.com/memtrace/memtrace/host"
	"github.com/memtrace/memtrace/metrics"
	"github.com/memtrace/memtrace/pipeline"
	"github.com/memtrace/memtrace/pprofout"
	"github.com/memtrace/memtrace/recording"
)

// Exports: files written at the end of a run (--pprof, --folded, --html) and the
// HTTP endpoint served while it runs (--listen). All of them are built
// from snapshots of the table; the session calls startExports once the
// table exists, exportEvent with every event, exportTick every rate period
// and writeExports at the end.

// ExportConfig holds the flags of the exports.
type ExportConfig struct {
	ExportFiles
	Listen       string
	ListenPublic bool
}

// metricsEvery: how often the --listen endpoint gets a fresh snapshot
// (a deep copy of the table: not every rate period).
const metricsEvery = time.Second

// exportState is the exports' part of a session.
type exportState struct {
	start       time.Time
	metrics     *metrics.Server
	serving     chan error
	lastMetrics time.Time
	history     *history.Collector // --html
	// lastFootprint is when the history's snapshot last got footprint
	// readings (footprintEvery apart: smaps costs more than a sample).
	lastFootprint time.Time
	// names caches what the exports resolved, so that in whole-host mode
	// the call sites of processes that exited still have names at the end.
	names *pprofout.Cache
	// exited folds the processes that exited (whole-host mode, --pprof or
	// --folded), resolved with src while their mappings are known.
	exited *pprofout.Exited
	src    pprofout.Sources
}

// startExports starts the --listen endpoint; stop ends it.
func (s *session) startExports() (stop func(), err error) {
	src := pprofout.Sources{Symbolizer: s.res, Mappings: s.res}
	if s.cfg.takesStacks() { // whole stacks: --detail's sites, sampled mode's breakdown
		src.Stacks = s.stackSource()
	}
	s.exports = &exportState{start: time.Now(), names: pprofout.NewCache(src), src: src}
	if s.host != nil && (s.cfg.PprofFile != "" || s.cfg.FoldedFile != "") {
		s.exports.exited = pprofout.NewExited(pipeline.MaxExitedStacks)
	}
	if s.cfg.HTMLFile != "" {
		s.exports.history = history.New(history.Options{})
	}
	if s.cfg.Listen == "" {
		return func() {}, nil
	}
	l, err := metrics.Listen(s.cfg.Listen, s.cfg.ListenPublic) // the address was checked with the flags
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	m := metrics.New(metrics.Options{Top: s.cfg.Top, Sources: s.exportSources(), Start: s.exports.start,
		Cgroup: func(pid uint32) string { return host.Cgroup(int(pid)) }})
	m.Update(s.snapshotAt(monotonicNow(), false))
	s.exports.metrics, s.exports.serving = m, make(chan error, 1)
	go func() { s.exports.serving <- m.Serve(l) }()
	s.log.Info("serving metrics", "addr", l.Addr().String())
	return func() {
		m.Close()
		if err := <-s.exports.serving; err != nil {
			s.log.Warn("--listen", "err", err)
		}
	}, nil
}

// exportTick runs every rate period, with the period's end: the endpoint
// gets a fresh snapshot every metricsEvery.
func (s *session) exportTick(now uint64) {
	e := s.exports
	if e == nil {
		return
	}
	s.historyTick(now)
	if e.metrics == nil || time.Since(e.lastMetrics) < metricsEvery {
		return
	}
	e.lastMetrics = time.Now()
	e.metrics.Update(s.freshSnapshot(false))
}

// historyTick gives the --html history a point at every tick of the
// table's rates (the recording has each one: a replay samples there too).
func (s *session) historyTick(now uint64) {
	e := s.exports
	if e == nil || e.history == nil {
		return
	}
	snap := s.pr.Bare(recording.Report{Time: now, All: true})
	if time.Since(e.lastFootprint) >= footprintEvery {
		e.lastFootprint = time.Now()
		s.readFootprints(&snap, false) // footprint.go: the timeline's heap resident
	}
	e.history.Sample(now, snap, s.table)
	if s.host != nil {
		e.names.Warm(snap) // before exited processes are forgotten
	}
}

// exportApplied hands the --html history every event once the table has
// applied it: a short run's points and moments (history.After).
func (s *session) exportApplied(e *event.Event) {
	if s.exports != nil && s.exports.history != nil {
		s.exports.history.After(e, s.table)
	}
}

// exportEvent hands the --html history every event the table gets.
func (s *session) exportEvent(e *event.Event) {
	if s.exports == nil {
		return
	}
	if e.Kind == event.Exec {
		s.exports.names.Forget(e.PID) // a new program: new addresses
	}
	if s.exports.history != nil {
		s.exports.history.Observe(e)
	}
}

// exportExited folds the final snapshots of processes that exited into
// the --pprof and --folded files' figures; whole-host mode calls it
// before it forgets their mappings and stacks.
func (s *session) exportExited(procs []aggregate.ProcessSnapshot) {
	if s.exports == nil || s.exports.exited == nil {
		return
	}
	for _, p := range procs {
		s.exports.exited.Add(p, s.exports.src) // not the cache: it would keep every PID's answers
	}
}

// exportMark gives the --html history a mark, so the page draws it.
func (s *session) exportMark(m aggregate.Mark) {
	if s.exports != nil && s.exports.history != nil {
		s.exports.history.Mark(m.Time, m.PID, m.Label, s.table)
	}
}

// writeExports writes the export files from the final snapshot.
func (s *session) writeExports() error {
	if !s.cfg.ExportFiles.Any() {
		return nil
	}
	snap := s.freshSnapshot(false) // after the final report: its readings
	now := time.Now()
	return pipeline.WriteExportFiles(&s.cfg.ExportFiles, s.exports.history, snap, s.exportSources(), pipeline.ExportEnd{
		Title: "memtrace " + strings.Join(s.title(), " "), Start: s.exports.start, Time: now,
		NS: monotonicNow(), Blocks: s.table, Exited: s.exports.exited})
}

func (s *session) exportSources() pprofout.Sources { return s.exports.names.Sources() }

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

// title names the run: the command, or the PIDs, or the host.
func (s *session) title() []string {
	switch {
	case len(s.cfg.Command) > 0:
		return s.cfg.Command
	case len(s.cfg.PIDs) > 0:
		var out []string
		for _, p := range s.cfg.PIDs {
			out = append(out, "-p "+strconv.Itoa(p))
		}
		return out
	}
	return []string{"(whole host)"}
}
