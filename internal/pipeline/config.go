package pipeline

import (
	"fmt"
	"os"
	"time"

	"github.com/memtrace/memtrace/internal/folded"
	"github.com/memtrace/memtrace/internal/htmlreport"
	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// TakesStacks says whether the probes unwind stacks (and a recording
// holds them): --detail, and every sampled allocation in sampled mode
// (cheap: only samples are unwound).
func TakesStacks(detail bool, sampleBytes uint64) bool { return detail || sampleBytes > 0 }

// StacksAsBreakdown says whether the stacks taken only break each call
// site's figures down (for the exports), the tables staying one row per
// call site: sampled mode without --detail.
func StacksAsBreakdown(detail bool, sampleBytes uint64) bool { return !detail && sampleBytes > 0 }

// RateConfig holds the flags of decaying rates and the live view.
type RateConfig struct {
	// HalfLives of the decaying averages, shortest first.
	HalfLives []time.Duration
	// Period is the sampling period: every half-life t must satisfy
	// 2^-12 <= period/t <= 1-2^-12.
	Period time.Duration
	// Watch shows the live view when stdout is a terminal, and periodic
	// reports otherwise.
	Watch bool
}

// SymbolizeConfig holds the flags of symbolization.
type SymbolizeConfig struct {
	// DebugDirs are the global debug directories (--debug-dir), nil for
	// the default.
	DebugDirs []string
	// NoDebuginfod: never download debug files, whatever DEBUGINFOD_URLS
	// says (debuginfod.go).
	NoDebuginfod bool
	// DebuginfodWait bounds how long, in all, the reports wait for
	// downloads (--debuginfod-wait).
	DebuginfodWait time.Duration
}

// ResolverOptions configures a run's symbolize.Resolver; d (nil for
// none) downloads debug files.
func (c SymbolizeConfig) ResolverOptions(d *symbolize.Debuginfod) []symbolize.Option {
	var opts []symbolize.Option
	if c.DebugDirs != nil {
		opts = append(opts, symbolize.WithDebugDirs(c.DebugDirs...))
	}
	if d != nil {
		opts = append(opts, symbolize.WithDebuginfod(d))
	}
	return opts
}

// LeakConfig holds the flags of the leak check (session/leaks.go).
type LeakConfig struct {
	// LeakCheck: classify the live blocks when a process exits (and, for
	// -p targets, when the run ends). On by default with a command.
	LeakCheck    bool
	LeakCheckSet bool
	// FailOnLeak: exit with ExitLeak when a checked process's lost bytes
	// of LeakKinds exceed FailBytes.
	FailOnLeak bool
	FailBytes  uint64
	LeakKinds  leakcheck.Kinds
	Heuristics leakcheck.Heuristics
	// Follow (-f): trace the processes the command forks.
	Follow bool
	// Suppressions: the user's, then (unless NoDefaultSupp) the built-ins.
	Suppressions  leakcheck.Suppressions
	NoDefaultSupp bool
	// JSONFile: NDJSON written there as well as the human report.
	JSONFile string
	// jsonFile is JSONFile, open from the start of the run to its end
	// (OpenJSONFile).
	jsonFile *os.File
}

// OpenJSONFile creates --json-file's file, when given, for the run about
// to start, and returns what closes it at the end.
func (c *LeakConfig) OpenJSONFile() (closeFile func(), err error) {
	if c.JSONFile == "" {
		return func() {}, nil
	}
	f, err := outfile.Create(c.JSONFile)
	if err != nil {
		return nil, fmt.Errorf("--json-file: %w", err)
	}
	c.jsonFile = f
	return func() { f.Close(); c.jsonFile = nil }, nil
}

// ExportFiles holds the flags of the export files, which live runs and
// replay both write.
type ExportFiles struct {
	PprofFile   string
	FoldedFile  string
	FoldedValue folded.Value
	HTMLFile    string
	Colors      []htmlreport.ColorRule
}

// Check makes sure each file asked for can be written before the run
// starts (it is created if missing, left as it is otherwise): a typo in a
// path failed only at the end, after the run, and lost the command's status.
func (c *ExportFiles) Check() error {
	for _, f := range []struct{ flag, path string }{{"--pprof", c.PprofFile}, {"--folded", c.FoldedFile}, {"--html", c.HTMLFile}} {
		if f.path == "" {
			continue
		}
		if err := outfile.Touch(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	return nil
}

// Any says whether a file is asked for.
func (c *ExportFiles) Any() bool { return c.PprofFile != "" || c.FoldedFile != "" || c.HTMLFile != "" }
