package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/session"
)

const replayUsage = `Usage: memtrace replay FILE [flags]

Prints the report the recorded run printed at its end (the same tables or
NDJSON, per call site), or, with --at, as of an earlier moment.

Flags:
`

// parseReplayFlags parses the flags of memtrace replay.
func parseReplayFlags(args []string, stderr io.Writer) (*session.ReplayConfig, error) {
	c := &session.ReplayConfig{}
	fs := flag.NewFlagSet("memtrace replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var at, sortKey string
	fs.StringVar(&at, "at", "", "report as of a moment: a time since the start (12.5s), peak, or mark:LABEL[#N] (the Nth mark so labelled)")
	fs.IntVar(&c.Top, "top", report.DefaultTop, "call sites shown per process (0 = all)")
	fs.StringVar(&sortKey, "sort", "live", "order call sites by live, allocated, allocs or rate")
	fs.BoolVar(&c.JSON, "json", false, "write NDJSON records (docs/json.md) instead of tables")
	fs.BoolVar(&c.Raw, "raw", false, "exact byte counts instead of human units")
	fs.StringVar(&c.Output, "o", "", "write the report to this file instead of stdout")
	fs.StringVar(&c.Output, "output", "", "same as -o")
	fs.BoolVar(&c.Detail, "detail", false, "print each call site's stack (recordings made with --detail)")
	fs.Var(peakTolerance{&c.PeakTol}, "peak-tolerance", "recompute the peak snapshot with this tolerance (default: the recorded run's)")
	checkRates := addRateFlags(fs, &c.Rates)
	addSymbolizeFlags(fs, &c.SymbolizeConfig)
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
	c.File = rest[0]
	fs.Visit(func(f *flag.Flag) {
		c.RatesOK = c.RatesOK || f.Name == "half-life" || f.Name == "period"
		c.TolSet = c.TolSet || f.Name == "peak-tolerance"
	})
	if err := checkRates(); err != nil {
		return nil, err
	}
	var err error
	if c.At, err = session.ParseAt(at); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if c.Sort, err = report.ParseSortKey(sortKey); err != nil {
		return nil, fmt.Errorf("%w: --sort: %w", errUsage, err)
	}
	if c.Top < 0 {
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
	return session.Replay(c, stdout, stderr)
}
