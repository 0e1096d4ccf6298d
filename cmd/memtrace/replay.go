package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/callstack"
	"github.com/memtrace/memtrace/recording"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/symbolize"
)

const replayUsage = `Usage: memtrace replay FILE [flags]

Prints the report the recorded run printed at its end (the same tables or
NDJSON, per call site), or, with --at, as of an earlier moment.

Flags:
`

// replayConfig holds the flags of memtrace replay.
type replayConfig struct {
	file    string
	at      atSpec
	top     int
	sort    report.SortKey
	json    bool
	raw     bool
	output  string
	detail  bool
	rates   rateConfig
	ratesOK bool // --half-life or --period given: rates are recomputed
	peakTol aggregate.PeakTolerance
	tolSet  bool
	symbolizeConfig
}

// atSpec is --at: a time since the start, the peak, or a mark.
type atSpec struct {
	kind  string // "", "time", "peak", "mark"
	time  time.Duration
	label string
	nth   int
}

func parseAt(s string) (atSpec, error) {
	switch {
	case s == "":
		return atSpec{}, nil
	case s == "peak":
		return atSpec{kind: "peak"}, nil
	case strings.HasPrefix(s, "mark:"):
		label, n := strings.TrimPrefix(s, "mark:"), 1
		if i := strings.LastIndexByte(label, '#'); i >= 0 {
			v, err := strconv.Atoi(label[i+1:])
			if err != nil || v < 1 {
				return atSpec{}, fmt.Errorf("--at %s: #N must be a number from 1", s)
			}
			label, n = label[:i], v
		}
		return atSpec{kind: "mark", label: label, nth: n}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || secs < 0 {
			return atSpec{}, fmt.Errorf("--at %q: write a time since the start (12.5s), peak, or mark:LABEL[#N]", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	return atSpec{kind: "time", time: d}, nil
}

func parseReplayFlags(args []string, stderr io.Writer) (*replayConfig, error) {
	c := &replayConfig{}
	fs := flag.NewFlagSet("memtrace replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var at, sortKey string
	fs.StringVar(&at, "at", "", "report as of a moment: a time since the start (12.5s), peak, or mark:LABEL[#N] (the Nth mark so labelled)")
	fs.IntVar(&c.top, "top", report.DefaultTop, "call sites shown per process (0 = all)")
	fs.StringVar(&sortKey, "sort", "live", "order call sites by live, allocated, allocs or rate")
	fs.BoolVar(&c.json, "json", false, "write NDJSON records (docs/json.md) instead of tables")
	fs.BoolVar(&c.raw, "raw", false, "exact byte counts instead of human units")
	fs.StringVar(&c.output, "o", "", "write the report to this file instead of stdout")
	fs.StringVar(&c.output, "output", "", "same as -o")
	fs.BoolVar(&c.detail, "detail", false, "print each call site's stack (recordings made with --detail)")
	fs.Var(peakTolerance{&c.peakTol}, "peak-tolerance", "recompute the peak snapshot with this tolerance (default: the recorded run's)")
	checkRates := addRateFlags(fs, &c.rates)
	addSymbolizeFlags(fs, &c.symbolizeConfig)
	// Flags may come before or after FILE.
	var rest []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				fmt.Fprint(stderr, replayUsage)
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		args = fs.Args()
		if len(args) > 0 {
			rest = append(rest, args[0])
			args = args[1:]
		}
	}
	if len(rest) != 1 {
		return nil, fmt.Errorf("%w: memtrace replay takes one recording (memtrace replay FILE [flags])", errUsage)
	}
	c.file = rest[0]
	fs.Visit(func(f *flag.Flag) {
		c.ratesOK = c.ratesOK || f.Name == "half-life" || f.Name == "period"
		c.tolSet = c.tolSet || f.Name == "peak-tolerance"
	})
	if err := checkRates(); err != nil {
		return nil, err
	}
	var err error
	if c.at, err = parseAt(at); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if c.sort, err = report.ParseSortKey(sortKey); err != nil {
		return nil, fmt.Errorf("%w: --sort: %w", errUsage, err)
	}
	if c.top < 0 {
		return nil, fmt.Errorf("%w: --top must be >= 0", errUsage)
	}
	return c, nil
}

// runReplay is `memtrace replay`: it returns the exit code.
func runReplay(args []string, stdout, stderr io.Writer) int {
	c, err := parseReplayFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitUsage
	}
	out := stdout
	if c.output != "" {
		f, err := os.Create(c.output)
		if err != nil {
			fmt.Fprintf(stderr, "memtrace: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		out = f
	}
	rp, err := replay(c)
	if rp == nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitUsage
	}
	if err != nil {
		// The readable prefix is reported; the error says what is missing.
		fmt.Fprintf(stderr, "memtrace: %s: %v; reporting the %d records before\n", c.file, err, rp.records)
	}
	if rp.missing != "" {
		fmt.Fprintf(stderr, "memtrace: --at %s: %s\n", c.at.String(), rp.missing)
		return exitUsage
	}
	o := report.Options{Top: c.top, Sort: c.sort, Final: c.at.kind == "" && err == nil, Raw: c.raw, Host: rp.info.Mode == "host"}
	if c.detail {
		o.Stacks = recordedStacks{frames: rp.stacks, code: codeView{rp.res}, depth: max(rp.info.StackDepth, 1)}
	}
	if c.json {
		err = report.WriteJSON(out, rp.snap, rp.res, o)
	} else {
		err = report.WriteText(out, rp.snap, rp.res, o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitError
	}
	if rp.readErr != nil {
		return exitError
	}
	return exitOK
}

func (a atSpec) String() string {
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
	stacks  map[int32][]uint64
	records uint64
	readErr error
	// missing says why --at found no such moment ("" when it did).
	missing string
}

// replay reads the recording into a new Table up to --at (all of it by
// default) and returns the table's snapshot then. The rest of the file is
// still read for the code mappings that symbolize the report. A read error
// leaves the prefix's snapshot and is returned with it; a nil result means
// the file could not be opened at all.
func replay(c *replayConfig) (*replayed, error) {
	stop := -1 // --at peak: the record after which the peak snapshot was taken
	if c.at.kind == "peak" {
		n, err := peakRecord(c)
		if n < 0 {
			if err == nil {
				return &replayed{missing: "the recording holds no allocation"}, nil
			}
			return nil, err
		}
		stop = n
	}
	r, err := recording.Open(c.file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rp := &replayed{info: r.Info(), res: symbolize.NewResolver(c.resolverOptions()...), stacks: map[int32][]uint64{}}
	rp.res.Offline()
	t := aggregate.NewTable()
	f := newFeeder(c, t)
	done := false
	marks := 0
	warned := map[string]bool{}
	var rec recording.Record
	n := 0
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			rp.readErr = err
			break
		}
		switch rec.Kind {
		case recording.KindMaps:
			if err := rp.res.AddCodeMappings(int(rec.PID), rec.Maps); err != nil && !warned[err.Error()] {
				warned[err.Error()] = true
				fmt.Fprintf(os.Stderr, "memtrace: warning: %v\n", err)
			}
			continue
		case recording.KindStack:
			rp.stacks[rec.StackID] = append([]uint64(nil), rec.Frames...)
			continue
		}
		if done {
			continue
		}
		if c.at.kind == "time" && recordTime(&rec) > rp.info.StartNS+uint64(c.at.time) {
			f.tickTo(t, rp.info.StartNS+uint64(c.at.time))
			rp.snap, done = t.Snapshot(), true
			continue
		}
		f.apply(t, &rec)
		n++
		switch {
		case c.at.kind == "mark" && rec.Kind == recording.KindMark && rec.Mark.Label == c.at.label:
			if marks++; marks == c.at.nth {
				rp.snap, done = t.Snapshot(), true
			}
		case stop >= 0 && n == stop:
			rp.snap, done = t.Snapshot(), true
		}
	}
	rp.records = r.Records
	if !done {
		switch c.at.kind {
		case "mark":
			rp.missing = fmt.Sprintf("the recording has %d marks labelled %q", marks, c.at.label)
			if rp.readErr != nil {
				rp.missing = ""
			}
		case "time":
			f.tickTo(t, rp.info.StartNS+uint64(c.at.time))
		}
		rp.snap = t.Snapshot()
	}
	return rp, rp.readErr
}

// recordTime is the time a record happened at (0 when it has none).
func recordTime(rec *recording.Record) uint64 {
	switch rec.Kind {
	case recording.KindEvent:
		return rec.Event.Time
	case recording.KindTick, recording.KindExited, recording.KindMark:
		return rec.Time
	}
	return 0
}

// peakRecord replays the file once to find the record after which the
// largest process took its kept peak snapshot.
func peakRecord(c *replayConfig) (int, error) {
	r, err := recording.Open(c.file)
	if err != nil {
		return -1, err
	}
	defer r.Close()
	t := aggregate.NewTable()
	f := newFeeder(c, t)
	at := map[uint32]int{} // pid -> record of its last snapshot
	seen := map[uint32]uint64{}
	var rec recording.Record
	n := 0
	for r.Next(&rec) == nil {
		if rec.Kind == recording.KindMaps || rec.Kind == recording.KindStack {
			continue
		}
		f.apply(t, &rec)
		n++
		if rec.Kind == recording.KindEvent {
			if k := t.PeakSnapshots(rec.Event.PID); k != seen[rec.Event.PID] {
				seen[rec.Event.PID], at[rec.Event.PID] = k, n
			}
		}
	}
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
	c        *replayConfig
	nextTick uint64 // recomputed rates: the next period's end
	started  bool
}

func newFeeder(c *replayConfig, t *aggregate.Table) *feeder {
	if c.tolSet {
		t.SetPeakTolerance(c.peakTol)
	}
	return &feeder{c: c}
}

func (f *feeder) apply(t *aggregate.Table, rec *recording.Record) {
	switch {
	case rec.Kind == recording.KindPeakTolerance && f.c.tolSet:
		return
	case (rec.Kind == recording.KindTick || rec.Kind == recording.KindHalfLives) && f.c.ratesOK:
		if rec.Kind == recording.KindHalfLives && !f.started {
			f.started = true
			t.SetHalfLives(f.c.rates.halfLives, rec.Time)
			f.nextTick = rec.Time + uint64(f.c.rates.period)
		}
		f.tickTo(t, rec.Time)
		return
	}
	if f.c.ratesOK && f.started {
		f.tickTo(t, recordTime(rec))
	}
	rec.ApplyTo(t)
}

// tickTo ends the recomputed rates' periods up to now.
func (f *feeder) tickTo(t *aggregate.Table, now uint64) {
	if !f.c.ratesOK || !f.started {
		return
	}
	for f.nextTick <= now {
		t.Tick(f.nextTick)
		f.nextTick += uint64(f.c.rates.period)
	}
}

// recordedStacks gives --detail's stacks from a recording.
type recordedStacks struct {
	frames map[int32][]uint64
	code   codeView
	depth  int
}

func (s recordedStacks) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	return callstack.Build(s.code, int(pid), site.Address, s.frames[site.StackID], s.depth)
}
