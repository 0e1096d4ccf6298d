package session

import (
	"os"
	"time"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/leakcheck"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/symbolize"
)

// Config is a run's settings, as cmd/memtrace's flags set them.
type Config struct {
	PIDs      []int
	Command   []string
	Duration  time.Duration
	Interval  time.Duration
	Top       int
	Sort      report.SortKey
	JSON      bool
	Raw       bool
	Output    string
	Allocator string
	RingBytes int
	Verbose   bool
	// Detail groups by whole call stack (StackDepth frames).
	Detail     bool
	StackDepth int
	Wrappers   []string
	// WrapperRule decides the wrappers whose callers are charged (from
	// Wrappers, --no-auto-wrappers and --not-wrapper).
	WrapperRule     allocator.WrapperRule
	RateConfig      // --half-life, --period, --watch
	HostConfig      // --sample-bytes, --comm, --cgroup
	SymbolizeConfig // --debug-dir, --no-debuginfod, --debuginfod-wait
	LeakConfig      // --leak-check, --fail-on-leak, -f, --suppressions, --json-file
	TimeConfig      // --record, --mark, --peak-tolerance, --dump-dir
	ExportConfig    // --pprof, --folded, --html, --listen (exports.go)
}

// takesStacks says whether the probes unwind stacks (and a recording
// holds them): --detail, and every sampled allocation in sampled mode
// (cheap: only samples are unwound).
func takesStacks(detail bool, sampleBytes uint64) bool { return detail || sampleBytes > 0 }

// stacksAsBreakdown says whether the stacks taken only break each call
// site's figures down (for the exports), the tables staying one row per
// call site: sampled mode without --detail.
func stacksAsBreakdown(detail bool, sampleBytes uint64) bool { return !detail && sampleBytes > 0 }

func (c *Config) takesStacks() bool       { return takesStacks(c.Detail, c.SampleBytes) }
func (c *Config) stacksAsBreakdown() bool { return stacksAsBreakdown(c.Detail, c.SampleBytes) }

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

// HostConfig holds the flags of sampling and of the whole-host mode.
type HostConfig struct {
	// SampleBytes is the sampling mean in bytes; 0 = exact. Its default
	// depends on the mode: 512 KiB with no target, exact with -p and --.
	SampleBytes uint64
	SampleSet   bool
	// Comm and Cgroup narrow the whole-host mode's processes; CgroupDir
	// is the cgroup's directory, CgroupPath its path as /proc/PID/cgroup
	// shows it.
	Comm                  string
	Cgroup                string
	CgroupDir, CgroupPath string
}

// Host reports whether the run traces every process (no target).
func (c *Config) Host() bool { return len(c.PIDs) == 0 && len(c.Command) == 0 }

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

// resolverOptions configures the session's symbolize.Resolver; d (nil for
// none) downloads debug files.
func (c SymbolizeConfig) resolverOptions(d *symbolize.Debuginfod) []symbolize.Option {
	var opts []symbolize.Option
	if c.DebugDirs != nil {
		opts = append(opts, symbolize.WithDebugDirs(c.DebugDirs...))
	}
	if d != nil {
		opts = append(opts, symbolize.WithDebuginfod(d))
	}
	return opts
}

// LeakConfig holds the flags of the leak check (leaks.go).
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
	JSONFile  string
	JSONFileW *os.File
}

// TimeConfig holds the flags about time: the recording, marks, the peak
// snapshot's tolerance and the numbered dumps.
type TimeConfig struct {
	Record  string
	Marks   []string
	PeakTol aggregate.PeakTolerance
	DumpDir string
}
