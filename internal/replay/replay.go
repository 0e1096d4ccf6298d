package replay

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// ReplayConfig holds the flags of memtrace replay.
type ReplayConfig struct {
	File    string
	At      At
	Top     int
	Sort    report.SortKey
	JSON    bool
	Raw     bool
	Output  string
	Detail  bool
	Rates   pipeline.RateConfig
	RatesOK bool // --half-life or --period given: rates are recomputed
	PeakTol aggregate.PeakTolerance
	TolSet  bool
	pipeline.SymbolizeConfig
	pipeline.ExportFiles // --pprof, --folded, --html as of --at (pipeline/exports.go)
	// LeakConfig: --leak-check, --fail-on-leak, --leak-kinds,
	// --suppressions, --no-default-suppressions, --json-file; LeakSet
	// says which were given, the others are the recorded run's
	// (leaks.go).
	pipeline.LeakConfig
	LeakSet ReplayLeakFlags
	// noHint: --at peak finds the moment by a read of its own, not from
	// the recording's peak hint.
	noHint bool
}

// At is --at: a time since the start, the peak, or a mark.
type At struct {
	kind  string // "", "time", "peak", "mark"
	time  time.Duration
	label string
	nth   int
}

// ParseAt parses --at WHEN.
func ParseAt(s string) (At, error) {
	switch {
	case s == "":
		return At{}, nil
	case s == "peak":
		return At{kind: "peak"}, nil
	case strings.HasPrefix(s, "mark:"):
		label, n := strings.TrimPrefix(s, "mark:"), 1
		if i := strings.LastIndexByte(label, '#'); i >= 0 {
			v, err := strconv.Atoi(label[i+1:])
			if err != nil || v < 1 {
				return At{}, fmt.Errorf("--at %s: #N must be a number from 1", s)
			}
			label, n = label[:i], v
		}
		return At{kind: "mark", label: label, nth: n}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || secs < 0 {
			return At{}, fmt.Errorf("--at %q: write a time since the start (12.5s), peak, or mark:LABEL[#N]", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	return At{kind: "time", time: d}, nil
}

// Replay is `memtrace replay`: it returns the exit code.
func Replay(c *ReplayConfig, stdout, stderr io.Writer) int {
	out := stdout
	if c.Output != "" {
		f, err := outfile.Create(c.Output)
		if err != nil {
			fmt.Fprintf(stderr, "memtrace: %v\n", err)
			return pipeline.ExitUsage
		}
		defer f.Close()
		out = f
	}
	closeJSON, err := c.OpenJSONFile()
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return pipeline.ExitUsage
	}
	defer closeJSON()
	if err := c.ExportFiles.Check(); err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return pipeline.ExitUsage
	}
	rp, err := replay(c, stderr)
	if rp == nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return pipeline.ExitUsage
	}
	if err != nil {
		// The readable prefix is reported; the error says what is missing.
		fmt.Fprintf(stderr, "memtrace: %s: %v; reporting the %d records before\n", c.File, err, rp.records)
	}
	if rp.missing != "" {
		fmt.Fprintf(stderr, "memtrace: --at %s: %s\n", c.At.String(), rp.missing)
		return pipeline.ExitUsage
	}
	lc, lerr := c.leakSettings(rp.info)
	if lerr != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", lerr)
		return pipeline.ExitUsage
	}
	pr := &pipeline.Printer{Res: rp.res, W: lc.Outputs(out, stderr, c.JSON), Base: report.Options{Top: c.Top, Sort: c.Sort, Raw: c.Raw,
		Host: rp.info.Mode == "host", ResidentOnly: rp.info.ResidentOnly, Kernel: rp.info.Kernel, Attach: rp.info.Attach}}
	// --fail-on-leak implies --detail, as in the live run.
	if c.Detail || (lc.FailOnLeak && rp.info.Detail) {
		pr.Base.Stacks = rp.recordedStacks()
	}
	leaks := rp.judgeLeaks(&lc)
	if leaks != nil {
		pr.Leaks = leaks.Shown
	}
	// What the live run printed, then, when the recording stops short of
	// its end (or predates report records), the table as it stands.
	err = nil
	for i, sr := range rp.reports {
		if err = rp.writeAccessJSON(c, out, i); err != nil {
			break
		}
		if err = pr.Write(sr.r, sr.snap); err != nil {
			break
		}
	}
	if err == nil {
		err = rp.writeAccessJSON(c, out, len(rp.reports))
	}
	if err == nil && (len(rp.reports) == 0 || rp.readErr != nil) {
		err = pr.Write(recording.Report{Final: c.At.kind == "" && rp.readErr == nil, All: true}, rp.snap)
	}
	if err == nil {
		err = rp.writeAccessText(c, out)
	}
	if err == nil {
		err = rp.writeExports(c)
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return pipeline.ExitError
	}
	code := pipeline.ExitOK
	if rp.readErr != nil {
		code = pipeline.ExitError
	}
	if leaks != nil {
		code = leaks.ExitCode(code, stderr)
	}
	return code
}

// recordedStacks is the --detail stack source of a recording.
func (rp *replayed) recordedStacks() pipeline.StackSource {
	return pipeline.StackSource{Store: rp.stacks, Code: pipeline.CodeView{Resolver: rp.res}, Depth: max(rp.info.StackDepth, 1)}
}

func (a At) String() string {
	switch a.kind {
	case "time":
		return a.time.String()
	case "mark":
		return fmt.Sprintf("mark:%s#%d", a.label, a.nth)
	}
	return a.kind
}

// replayed is what a replay produced.
type replayed struct {
	info    recording.Info
	snap    aggregate.Snapshot
	res     *symbolize.Resolver
	stacks  *pipeline.StackStore
	records uint64
	readErr error
	// missing says why --at found no such moment ("" when it did).
	missing string
	// The exports' part: the table as of snap, the --html history and
	// the moment snap shows (kernel monotonic ns).
	table   *aggregate.Table
	history *history.Collector
	endNS   uint64
	// exited folds the processes a whole-host recording saw exit before
	// that moment, as the live run's exports fold them (nil otherwise).
	exited *pprofout.Exited
	// leakChecks are the leak checks recorded up to the moment replayed.
	leakChecks []recording.LeakCheck
	// footprints are the latest footprint readings recorded up to that
	// moment, by process (footprint.go).
	footprints map[uint32]pipeline.RecordedFootprint
	// reports are the reports the live run printed, with what each
	// showed (without --at; none in recordings made before version 4).
	reports []shownReport
	// stream holds what the live run's --json wrote as it happened, in
	// order: the access epochs folded from the recording and the marks
	// (access.go); accessLast is each process's latest epoch.
	stream     []streamed
	accessLast map[uint32]streamed
}

// shownReport is a recorded report and its snapshot.
type shownReport struct {
	r    recording.Report
	snap aggregate.Snapshot
}

// writeExports writes the export files of the moment replayed, as the
// live run writes them at its end.
func (rp *replayed) writeExports(c *ReplayConfig) error {
	if !c.ExportFiles.Any() {
		return nil
	}
	since := time.Duration(rp.endNS - min(rp.endNS, rp.info.StartNS))
	return pipeline.WriteExportFiles(&c.ExportFiles, rp.history, rp.snap, pprofout.NewCache(rp.exportSources()).Sources(), pipeline.ExportEnd{
		Title: "memtrace replay " + filepath.Base(c.File), Start: rp.info.Start, Time: rp.info.Start.Add(since),
		NS: rp.endNS, Blocks: rp.table, Exited: rp.exited})
}

// exportSources resolves the exports' call sites and stacks from the
// recording.
func (rp *replayed) exportSources() pprofout.Sources {
	src := pprofout.Sources{Symbolizer: rp.res, Mappings: rp.res}
	if pipeline.TakesStacks(rp.info.Detail, rp.info.SampleBytes) {
		src.Stacks = rp.recordedStacks()
	}
	return src
}

// foldExited gives rp.exited the final snapshot of pid, about to be
// forgotten, if it exited: whole-host mode forgets a process when it
// exits (folded, as the live run's exportExited does) and when it
// executes a new program (not folded: the old program's figures are void).
func (rp *replayed) foldExited(t *aggregate.Table, pid uint32) {
	for _, p := range t.SnapshotOf(pid).Processes {
		if p.Exited {
			rp.exited.Add(p, rp.exportSources())
		}
	}
}

// replay reads the recording into a new Table up to --at (all of it by
// default) and returns the table's snapshot then. The rest of the file is
// still read for the code mappings that symbolize the report; warnings
// (files that differ from the recorded ones) go to warn. A read error
// leaves the prefix's snapshot and is returned with it; a nil result means
// the file could not be opened at all.
func replay(c *ReplayConfig, warn io.Writer) (*replayed, error) {
	stop := -1 // --at peak: the record after which the peak snapshot was taken
	hint, useHint := recording.Peak{}, false
	if c.At.kind == "peak" && !c.noHint && !c.TolSet {
		// The live run's answer, at the file's end: one read (the hint
		// holds for the recorded peak tolerance only).
		hint, useHint = recording.ReadPeak(c.File)
	}
	if c.At.kind == "peak" && !useHint {
		n, err := peakRecord(c)
		if n < 0 {
			if err == nil {
				return &replayed{missing: "the recording holds no allocation"}, nil
			}
			return nil, err
		}
		stop = n
	}
	r, err := recording.Open(c.File)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// Recorded modules with no debug information ask debuginfod as a live
	// run's do; diagnostics are warnings only, as replay has no -v.
	log := slog.New(slog.NewTextHandler(warn, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dl := pipeline.NewDownloads(c.SymbolizeConfig, log)
	defer dl.Close()
	rp := &replayed{info: r.Info(), res: symbolize.NewResolver(c.ResolverOptions(dl.Client())...), stacks: pipeline.NewStackStore(),
		footprints: map[uint32]pipeline.RecordedFootprint{}, accessLast: map[uint32]streamed{}}
	rp.res.Offline()
	t := aggregate.NewTable()
	t.SetStackBreakdown(pipeline.StacksAsBreakdown(rp.info.Detail, rp.info.SampleBytes)) // as the live run
	f := newFeeder(c, t)
	rp.table = t
	// Without --at the reports the live run printed are printed again,
	// each from the table as of its record (pipeline.Printer).
	pr := &pipeline.Printer{Table: t, Res: rp.res, HoldExits: c.At.kind == "" && rp.info.Mode == "host",
		Footprints: func(snap *aggregate.Snapshot, _ bool) { pipeline.WithFootprints(snap, rp.footprints) }}
	if rp.info.Mode == "host" && (c.PprofFile != "" || c.FoldedFile != "") {
		rp.exited = pprofout.NewExited(pipeline.MaxExitedStacks)
	}
	folder := &pipeline.AccessFolder{}
	if c.HTMLFile != "" {
		h := history.New(history.Options{})
		rp.history = h
		folder.OnStart = func(pid uint32, tr *access.Tracker) { h.ColdRanges(pid, tr.Cold) } // the heap map greys cold runs
		// Sampled at each rate tick, as a live run samples it, with the
		// footprint readings recorded so far.
		f.onTick = func(now uint64) {
			snap := t.Snapshot()
			pipeline.WithFootprints(&snap, rp.footprints) // footprint.go
			h.Sample(now, snap, t)
		}
	}
	done := false
	marks := 0
	warned := map[string]bool{}
	n := 0
	hintSeen := uint64(0)
	var listed []aggregate.ProcessSnapshot // by the next whole-host report (InListed)
	loop := &pipeline.Loop{Table: t, Printer: pr, Report: func(r recording.Report) error {
		r.PIDs = slices.Clone(r.PIDs)
		snap := pr.Snapshot(r)
		if r.All && !r.Exited {
			snap.Processes, listed = append(snap.Processes, listed...), nil
		}
		rp.reports = append(rp.reports, shownReport{r, snap})
		return nil
	}}
	if rp.history != nil {
		loop.Observe = func(in *pipeline.Input) { observe(rp.history, t, in) }
	}
	// The one loop (pipeline.Loop) with the replay's policy: --at stops
	// the table at a moment; the rest of the file still gives the code
	// mappings and stacks that symbolize it.
	rp.readErr = (&pipeline.RecordingSource{R: r}).Run(func(in *pipeline.Input) error {
		switch in.Kind {
		case pipeline.InCodeMaps:
			if err := rp.res.AddCodeMappings(int(in.PID), in.Maps); err != nil && !warned[err.Error()] {
				warned[err.Error()] = true
				fmt.Fprintf(warn, "memtrace: warning: %v\n", err)
			}
			return nil
		case pipeline.InStack:
			rp.stacks.Add(in.PID, in.StackID, in.Frames)
			return nil
		case pipeline.InPyFrame:
			rp.res.AddPythonFrame(in.PyFrame)
			return nil
		case pipeline.InJITSymbols:
			rp.res.AddJITSymbols(int(in.PID), in.JIT)
			return nil
		}
		if done {
			return nil
		}
		if c.At.kind == "time" && inputTime(in) > rp.info.StartNS+uint64(c.At.time) {
			f.tickTo(t, rp.info.StartNS+uint64(c.At.time))
			rp.snap, done = t.Snapshot(), true
			return nil
		}
		switch in.Kind {
		case pipeline.InFootprint:
			rp.footprints[in.PID] = pipeline.RecordedFootprint{R: in.Footprint.R, Ranges: slices.Clone(in.Footprint.Ranges)}
			return nil
		case pipeline.InListed:
			listed = append(listed, pipeline.Listed(in))
			return nil
		case pipeline.InAccess:
			rp.foldAccess(c, folder, t, in.Access)
			return nil
		case pipeline.InLeakCheck:
			lc := *in.Leak
			lc.Blocks = slices.Clone(lc.Blocks)
			rp.leakChecks = append(rp.leakChecks, lc)
			return nil
		case pipeline.InForget:
			if rp.exited != nil {
				rp.foldExited(t, in.PID)
			}
			loop.Feed(in)                 // an exited process keeps its latest footprint
			delete(rp.footprints, in.PID) // an exec: a new address space
		case pipeline.InReport:
			if c.At.kind == "" {
				loop.Feed(in)
			}
		default:
			f.apply(loop, in)
			if in.Kind == pipeline.InMark && c.At.kind == "" {
				m := loop.Mark // written where the live run's --json wrote it (access.go)
				rp.stream = append(rp.stream, streamed{at: len(rp.reports), mark: &m})
			}
		}
		n++
		rp.endNS = max(rp.endNS, inputTime(in))
		switch {
		case c.At.kind == "mark" && in.Kind == pipeline.InMark && in.Label == c.At.label:
			if marks++; marks == c.At.nth {
				rp.snap, done = t.Snapshot(), true
			}
		case stop >= 0 && n == stop:
			rp.snap, done = t.Snapshot(), true
		case useHint && in.Kind == pipeline.InEvent && in.Event.PID == hint.PID:
			if k := t.PeakSnapshots(hint.PID); k != hintSeen {
				hintSeen = k
				if k == hint.Snapshots && peakTime(t, hint.PID) == hint.Time {
					rp.snap, done = t.Snapshot(), true
				}
			}
		}
		return nil
	})
	rp.records = r.Records
	if useHint && !done && rp.readErr == nil {
		// A hint that names no moment of the stream: the two reads.
		c2 := *c
		c2.noHint = true
		return replay(&c2, warn)
	}
	if !done {
		switch c.At.kind {
		case "mark":
			rp.missing = fmt.Sprintf("the recording has %d marks labelled %q", marks, c.At.label)
			if rp.readErr != nil {
				rp.missing = ""
			}
		case "time":
			f.tickTo(t, rp.info.StartNS+uint64(c.At.time))
		}
		rp.snap = t.Snapshot()
	}
	if c.At.kind == "time" {
		rp.endNS = rp.info.StartNS + uint64(c.At.time)
	}
	dl.Wait(nil)                                     // before anything is resolved
	pipeline.WithFootprints(&rp.snap, rp.footprints) // footprint.go
	return rp, rp.readErr
}

// observe gives the --html history what a live run gives it: events
// (applied to t) and marks.
func observe(h *history.Collector, t *aggregate.Table, in *pipeline.Input) {
	switch in.Kind {
	case pipeline.InEvent:
		h.Observe(in.Event)
		h.After(in.Event, t)
	case pipeline.InMark:
		h.Mark(in.Time, in.PID, in.Label, t)
	}
}

// inputTime is the time an input happened at (0 when it has none).
func inputTime(in *pipeline.Input) uint64 {
	switch in.Kind {
	case pipeline.InEvent:
		return in.Event.Time
	case pipeline.InTick, pipeline.InExited, pipeline.InMark, pipeline.InLeakCheck, pipeline.InAccess:
		return in.Time
	}
	return 0
}

// peakTime is the time of pid's kept peak snapshot (0: none).
func peakTime(t *aggregate.Table, pid uint32) uint64 {
	for _, p := range t.SnapshotOf(pid).Processes {
		if p.Peak != nil {
			return p.Peak.Time
		}
	}
	return 0
}

// peakPasses counts the reads peakRecord made (tests).
var peakPasses int

// peakRecord replays the file once to find the record after which the
// largest process took its kept peak snapshot.
func peakRecord(c *ReplayConfig) (int, error) {
	peakPasses++
	r, err := recording.Open(c.File)
	if err != nil {
		return -1, err
	}
	defer r.Close()
	t := aggregate.NewTable()
	f := newFeeder(c, t)
	loop := &pipeline.Loop{Table: t, Printer: &pipeline.Printer{Table: t}, Report: func(recording.Report) error { return nil }}
	at := map[uint32]int{} // pid -> record of its last snapshot
	seen := map[uint32]uint64{}
	n := 0
	(&pipeline.RecordingSource{R: r}).Run(func(in *pipeline.Input) error {
		switch in.Kind {
		case pipeline.InCodeMaps, pipeline.InStack, pipeline.InLeakCheck, pipeline.InFootprint, pipeline.InListed, pipeline.InAccess, pipeline.InJITSymbols:
			return nil
		}
		f.apply(loop, in)
		n++
		if in.Kind == pipeline.InEvent {
			if k := t.PeakSnapshots(in.Event.PID); k != seen[in.Event.PID] {
				seen[in.Event.PID], at[in.Event.PID] = k, n
			}
		}
		return nil
	})
	best, bestPeak := -1, uint64(0)
	for _, p := range t.Snapshot().Processes {
		if n, ok := at[p.PID]; ok && (best < 0 || p.PeakLiveBytes > bestPeak) {
			best, bestPeak = n, p.PeakLiveBytes
		}
	}
	return best, nil
}

// feeder applies records to a Table, replacing the recorded rates and
// peak tolerance with the flags' when given.
type feeder struct {
	c        *ReplayConfig
	nextTick uint64 // recomputed rates: the next period's end
	started  bool
	onTick   func(now uint64) // after each rate period ends (nil: nothing)
}

func newFeeder(c *ReplayConfig, t *aggregate.Table) *feeder {
	if c.TolSet {
		t.SetPeakTolerance(c.PeakTol)
	}
	return &feeder{c: c}
}

func (f *feeder) apply(l *pipeline.Loop, in *pipeline.Input) {
	t := l.Table
	switch {
	case in.Kind == pipeline.InPeakTolerance && f.c.TolSet:
		return
	case (in.Kind == pipeline.InTick || in.Kind == pipeline.InHalfLives) && f.c.RatesOK:
		if in.Kind == pipeline.InHalfLives && !f.started {
			f.started = true
			t.SetHalfLives(f.c.Rates.HalfLives, in.Time)
			f.nextTick = in.Time + uint64(f.c.Rates.Period)
		}
		f.tickTo(t, in.Time)
		return
	}
	if f.c.RatesOK && f.started {
		f.tickTo(t, inputTime(in))
	}
	l.Feed(in)
	if in.Kind == pipeline.InTick && f.onTick != nil {
		f.onTick(in.Time)
	}
}

// tickTo ends the recomputed rates' periods up to now.
func (f *feeder) tickTo(t *aggregate.Table, now uint64) {
	if !f.c.RatesOK || !f.started {
		return
	}
	for f.nextTick <= now {
		t.Tick(f.nextTick)
		if f.onTick != nil {
			f.onTick(f.nextTick)
		}
		f.nextTick += uint64(f.c.Rates.Period)
	}
}
