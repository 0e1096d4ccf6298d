package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/tracer"
)

type config struct {
	pids      []int
	command   []string
	duration  time.Duration
	interval  time.Duration
	top       int
	sort      report.SortKey
	json      bool
	raw       bool
	output    string
	allocator string
	ringBytes int
	verbose   bool
	// detail groups by whole call stack (stackDepth frames).
	detail     bool
	stackDepth int
	wrappers   []string
	rateConfig // --half-life, --period, --watch (flags_rates.go)
	hostConfig // --sample-bytes, --comm, --cgroup (flags_host.go)

	symbolizeConfig // --debug-dir (flags_symbolize.go)
	leakConfig      // --leak-check, --fail-on-leak, -f, --suppressions, --json-file (leaks_flags.go)
	timeConfig      // --record, --mark, --peak-tolerance, --dump-dir (flags_time.go)
}

// nameList collects repeated string flags.
type nameList struct{ names *[]string }

func (n nameList) String() string { return "" }
func (n nameList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("empty name")
	}
	*n.names = append(*n.names, s)
	return nil
}

// pidList accepts -p PID, -p PID,PID and repeats.
type pidList struct{ pids *[]int }

func (p pidList) String() string { return "" }
func (p pidList) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("not a process ID: %q", f)
		}
		*p.pids = append(*p.pids, n)
	}
	return nil
}

const usageText = `memtrace traces a native process's allocations with eBPF and reports, per
call site, what is live, allocated and freed.

Usage:
  memtrace [flags] -p PID[,PID...]     attach to running processes
  memtrace [flags] -- COMMAND [ARGS...] start COMMAND and trace it from its first instruction
  memtrace [flags]                      trace every process on the host (sampled)
  memtrace replay FILE [flags]          print the report of a run recorded with --record (memtrace replay -h)
  memtrace diff OLD NEW [flags]         compare two runs' reports or recordings (memtrace diff -h)

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("memtrace", flag.ContinueOnError)
	// Errors are reported by the caller in one line; only -h prints usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var sortKey string
	fs.Var(pidList{&c.pids}, "p", "process ID(s) to trace; repeatable or comma-separated")
	fs.Var(pidList{&c.pids}, "pid", "same as -p")
	fs.DurationVar(&c.duration, "d", 0, "stop after this long (0 = until the targets exit or Ctrl-C)")
	fs.DurationVar(&c.duration, "duration", 0, "same as -d")
	fs.DurationVar(&c.interval, "i", 0, "print a report every interval as well as at the end")
	fs.DurationVar(&c.interval, "interval", 0, "same as -i")
	fs.IntVar(&c.top, "top", 10, "call sites shown per process (0 = all)")
	fs.StringVar(&sortKey, "sort", "live", "order call sites by live, allocated or allocs")
	fs.BoolVar(&c.json, "json", false, "write NDJSON records (docs/json.md) instead of tables")
	fs.BoolVar(&c.raw, "raw", false, "exact byte counts instead of human units")
	fs.StringVar(&c.output, "o", "", "write reports to this file instead of stdout")
	fs.StringVar(&c.output, "output", "", "same as -o")
	fs.StringVar(&c.allocator, "allocator", "", "probe the allocator in this file instead of the one the target binds to")
	fs.IntVar(&c.ringBytes, "ring-size", 64<<20, "ring buffer bytes (a power of two; default 64 MiB, 4 MiB when sampling)")
	fs.BoolVar(&c.verbose, "v", false, "log what is attached, and where")
	fs.BoolVar(&c.verbose, "verbose", false, "same as -v")
	fs.BoolVar(&c.detail, "detail", false, "group by whole call stack and print each stack under its row")
	fs.IntVar(&c.stackDepth, "stack-depth", 16, "frames per stack with --detail (at most 126)")
	var wrapperFile string
	var extraWrappers []string
	noWrappers := false
	fs.Var(nameList{&extraWrappers}, "wrapper", "also treat function NAME as an allocation wrapper (repeatable)")
	fs.StringVar(&wrapperFile, "wrappers", "", "file of allocation wrapper names, one per line")
	fs.BoolVar(&noWrappers, "no-default-wrappers", false, "do not treat operator new, strdup, asprintf … as wrappers")
	checkRates := addRateFlags(fs, &c.rateConfig)
	addSymbolizeFlags(fs, &c.symbolizeConfig)
	checkHost := addHostFlags(fs, c)
	checkLeaks := addLeakFlags(fs, c)
	checkTime := addTimeFlags(fs, &c.timeConfig)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stderr, usageText)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	c.command = fs.Args()
	if err := checkRates(); err != nil {
		return nil, err
	}
	if !noWrappers {
		c.wrappers = append(c.wrappers, allocator.DefaultWrappers...)
	}
	c.wrappers = append(c.wrappers, extraWrappers...)
	if wrapperFile != "" {
		names, err := allocator.ReadWrapperFile(wrapperFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --wrappers: %w", errUsage, err)
		}
		c.wrappers = append(c.wrappers, names...)
	}
	if c.stackDepth < 1 || c.stackDepth >= tracer.MaxStackDepth {
		return nil, fmt.Errorf("%w: --stack-depth must be between 1 and %d", errUsage, tracer.MaxStackDepth-1)
	}
	k, err := report.ParseSortKey(sortKey)
	if err != nil {
		return nil, fmt.Errorf("%w: --sort: %w", errUsage, err)
	}
	c.sort = k
	switch {
	case len(c.pids) > 0 && len(c.command) > 0:
		return nil, fmt.Errorf("%w: give -p or a command, not both", errUsage)
	case c.top < 0:
		return nil, fmt.Errorf("%w: --top must be >= 0", errUsage)
	case c.duration < 0 || c.interval < 0:
		return nil, fmt.Errorf("%w: durations must be positive", errUsage)
	}
	if err := checkHost(); err != nil {
		return nil, err
	}
	if err := checkLeaks(); err != nil {
		return nil, err
	}
	if err := checkTime(); err != nil {
		return nil, err
	}
	return c, nil
}
