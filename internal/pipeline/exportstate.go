package pipeline

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/metrics"
	"github.com/memtrace/memtrace/internal/pprofout"
)

// metricsEvery: how often the --listen endpoint gets a fresh snapshot
// (a deep copy of the table: not every rate period).
const metricsEvery = time.Second

// Exports observes a live run for its exports: the --html history, the
// names the exports resolved (in whole-host mode the call sites of
// processes that exited keep names to the end), the exited processes
// --pprof and --folded fold in, and the --listen endpoint's data.
type Exports struct {
	Start   time.Time
	History *history.Collector // --html; nil without
	// Exited folds the processes that exited (whole-host mode, --pprof or
	// --folded; nil otherwise), resolved with src while their mappings
	// are known.
	Exited *pprofout.Exited

	names         *pprofout.Cache
	src           pprofout.Sources
	host          bool
	metrics       *metrics.Server
	serving       chan error
	lastMetrics   time.Time
	lastFootprint time.Time
}

// NewExports is the exports' state of a live run whose call sites src
// resolves; host: the whole-host mode.
func NewExports(files *ExportFiles, src pprofout.Sources, host bool) *Exports {
	e := &Exports{Start: time.Now(), names: pprofout.NewCache(src), src: src, host: host}
	if host && (files.PprofFile != "" || files.FoldedFile != "") {
		e.Exited = pprofout.NewExited(MaxExitedStacks)
	}
	if files.HTMLFile != "" {
		e.History = history.New(history.Options{})
	}
	return e
}

// Sources resolve the exports' call sites, through the cache.
func (e *Exports) Sources() pprofout.Sources { return e.names.Sources() }

// Serve serves the --listen endpoint at addr (checked with the flags)
// from first on; stop ends it.
func (e *Exports) Serve(addr string, public bool, o metrics.Options, first aggregate.Snapshot, log *slog.Logger) (stop func(), err error) {
	l, err := metrics.Listen(addr, public)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	o.Sources, o.Start = e.Sources(), e.Start
	m := metrics.New(o)
	m.Update(first)
	e.metrics, e.serving = m, make(chan error, 1)
	go func() { e.serving <- m.Serve(l) }()
	log.Info("serving metrics", "addr", l.Addr().String())
	return func() {
		m.Close()
		if err := <-e.serving; err != nil {
			log.Warn("--listen", "err", err)
		}
	}, nil
}

// MetricsDue says whether the endpoint is due a fresh snapshot
// (UpdateMetrics), every metricsEvery.
func (e *Exports) MetricsDue() bool {
	return e.metrics != nil && time.Since(e.lastMetrics) >= metricsEvery
}

// UpdateAccess gives --listen and --html's timeline a process's latest
// access epoch.
func (e *Exports) UpdateAccess(pid uint32, ep access.Epoch) {
	if e == nil {
		return
	}
	if e.metrics != nil {
		e.metrics.UpdateAccess(pid, ep)
	}
	if e.History != nil {
		e.History.Cold(pid, ep.Process.Cold)
	}
}

// UpdateMetrics gives the endpoint a fresh snapshot.
func (e *Exports) UpdateMetrics(snap aggregate.Snapshot) {
	e.lastMetrics = time.Now()
	e.metrics.Update(snap)
}

// FootprintDue says whether the history's next sample gets footprint
// readings, every so often (smaps costs more than a sample).
func (e *Exports) FootprintDue(every time.Duration) bool {
	if time.Since(e.lastFootprint) < every {
		return false
	}
	e.lastFootprint = time.Now()
	return true
}

// Sample gives the history a point at a tick of the table's rates (the
// recording has each one: a replay samples there too).
func (e *Exports) Sample(now uint64, snap aggregate.Snapshot, t *aggregate.Table) {
	e.History.Sample(now, snap, t)
	if e.host {
		e.names.Warm(snap) // before exited processes are forgotten
	}
}

// Event sees every event before the table does.
func (e *Exports) Event(ev *event.Event) {
	if ev.Kind == event.Exec {
		e.names.Forget(ev.PID) // a new program: new addresses
	}
	if e.History != nil {
		e.History.Observe(ev)
	}
}

// Applied sees every event once the table has applied it: a short
// run's points and moments (history.After).
func (e *Exports) Applied(ev *event.Event, t *aggregate.Table) {
	if e.History != nil {
		e.History.After(ev, t)
	}
}

// Mark gives the history a mark, so the page draws it.
func (e *Exports) Mark(m aggregate.Mark, t *aggregate.Table) {
	if e.History != nil {
		e.History.Mark(m.Time, m.PID, m.Label, t)
	}
}

// ExitedProcs folds the final snapshots of processes that exited into the
// --pprof and --folded files' figures; whole-host mode calls it before it
// forgets their mappings and stacks.
func (e *Exports) ExitedProcs(procs []aggregate.ProcessSnapshot) {
	if e.Exited == nil {
		return
	}
	for _, p := range procs {
		e.Exited.Add(p, e.src) // not the cache: it would keep every PID's answers
	}
}
