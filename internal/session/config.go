package session

import (
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/report"
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
	// NoPythonFrames: Python processes keep native frames only (their
	// pymalloc calls are still traced).
	NoPythonFrames bool
	// JVMPerfMap asks each traced JVM for its perf map at each report
	// (--jvm-perfmap; jvm.go).
	JVMPerfMap bool
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
	TablesConfig    // --tables-wait, --no-cache, --cache-size
}

// DefaultCacheBytes bounds the unwind tables kept on disk (--cache-size).
const DefaultCacheBytes = 512 << 20

// TablesConfig holds the unwind tables' settings.
type TablesConfig struct {
	// TablesWait is the longest a target's probes wait for its tables;
	// 0: they never wait (docs/unwinding.md, "Before the tables").
	TablesWait time.Duration
	// NoCache keeps tables in memory only; CacheBytes bounds the cache.
	NoCache    bool
	CacheBytes int64
}

func (c *Config) takesStacks() bool { return pipeline.TakesStacks(c.Detail, c.SampleBytes) }
func (c *Config) stacksAsBreakdown() bool {
	return pipeline.StacksAsBreakdown(c.Detail, c.SampleBytes)
}

// The settings a live run shares with replay (package pipeline).
type (
	RateConfig      = pipeline.RateConfig
	SymbolizeConfig = pipeline.SymbolizeConfig
	LeakConfig      = pipeline.LeakConfig
	ExportFiles     = pipeline.ExportFiles
)

// HostConfig holds the flags of sampling and of the whole-host mode.
type HostConfig struct {
	// SampleBytes is the sampling mean in bytes; 0 = exact. Its default
	// depends on the mode: 512 KiB with no target, exact with -p and --.
	SampleBytes uint64
	SampleSet   bool
	// Heap traces the allocator: always with -p and --; with no target
	// only with --heap (or --sample-bytes).
	Heap bool
	// ResidentBytes is the mean bytes of write faults between sampled
	// faults (resident attribution); 0 = off.
	ResidentBytes uint64
	// Comm and Cgroup narrow the whole-host mode's processes; CgroupDir
	// is the cgroup's directory, CgroupPath its path as /proc/PID/cgroup
	// shows it.
	Comm                  string
	Cgroup                string
	CgroupDir, CgroupPath string
}

// Host reports whether the run traces every process (no target).
func (c *Config) Host() bool { return len(c.PIDs) == 0 && len(c.Command) == 0 }

// TimeConfig holds the flags about time: the recording, marks, the peak
// snapshot's tolerance and the numbered dumps.
type TimeConfig struct {
	Record  string
	Marks   []string
	PeakTol aggregate.PeakTolerance
	DumpDir string
	// Access is the epoch of access statistics (--access; 0 = off);
	// ColdAfter the epochs untouched after which a page is cold.
	Access    time.Duration
	ColdAfter int
}
