package main

import (
	"flag"
	"fmt"
	"github.com/memtrace/memtrace/session"
	"io"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/tracer"
)

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

func parseFlags(args []string, stderr io.Writer) (*session.Config, error) {
	c := &session.Config{}
	fs := flag.NewFlagSet("memtrace", flag.ContinueOnError)
	// Errors are reported by the caller in one line; only -h prints usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var sortKey string
	fs.Var(pidList{&c.PIDs}, "p", "process ID(s) to trace; repeatable or comma-separated")
	fs.Var(pidList{&c.PIDs}, "pid", "same as -p")
	fs.DurationVar(&c.Duration, "d", 0, "stop after this long (0 = until the targets exit or Ctrl-C)")
	fs.DurationVar(&c.Duration, "duration", 0, "same as -d")
	fs.DurationVar(&c.Interval, "i", 0, "print a report every interval as well as at the end")
	fs.DurationVar(&c.Interval, "interval", 0, "same as -i")
	fs.IntVar(&c.Top, "top", 10, "call sites shown per process (0 = all)")
	fs.StringVar(&sortKey, "sort", "live", "order call sites by live, allocated or allocs")
	fs.BoolVar(&c.JSON, "json", false, "write NDJSON records (docs/json.md) instead of tables")
	fs.BoolVar(&c.Raw, "raw", false, "exact byte counts instead of human units")
	fs.StringVar(&c.Output, "o", "", "write reports to this file instead of stdout")
	fs.StringVar(&c.Output, "output", "", "same as -o")
	fs.StringVar(&c.Allocator, "allocator", "", "probe the allocator in this file instead of the one the target binds to")
	fs.IntVar(&c.RingBytes, "ring-size", 64<<20, "ring buffer bytes (a power of two; default 64 MiB, 4 MiB when sampling)")
	fs.BoolVar(&c.Verbose, "v", false, "log what is attached, and where")
	fs.BoolVar(&c.Verbose, "verbose", false, "same as -v")
	fs.BoolVar(&c.Detail, "detail", false, "group by whole call stack and print each stack under its row")
	fs.IntVar(&c.StackDepth, "stack-depth", 16, "frames per stack with --detail (at most 126)")
	var wrapperFile string
	var extraWrappers []string
	noWrappers := false
	fs.Var(nameList{&extraWrappers}, "wrapper", "also treat function NAME as an allocation wrapper (repeatable)")
	fs.StringVar(&wrapperFile, "wrappers", "", "file of allocation wrapper names, one per line")
	fs.BoolVar(&noWrappers, "no-default-wrappers", false, "do not treat operator new, strdup, asprintf … as wrappers")
	checkRates := addRateFlags(fs, &c.RateConfig)
	addSymbolizeFlags(fs, &c.SymbolizeConfig)
	checkHost := addHostFlags(fs, c)
	checkLeaks := addLeakFlags(fs, c)
	checkTime := addTimeFlags(fs, &c.TimeConfig)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stderr, usageText)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	c.Command = fs.Args()
	if err := checkRates(); err != nil {
		return nil, err
	}
	if !noWrappers {
		c.Wrappers = append(c.Wrappers, allocator.DefaultWrappers...)
	}
	c.Wrappers = append(c.Wrappers, extraWrappers...)
	if wrapperFile != "" {
		names, err := allocator.ReadWrapperFile(wrapperFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --wrappers: %w", errUsage, err)
		}
		c.Wrappers = append(c.Wrappers, names...)
	}
	if c.StackDepth < 1 || c.StackDepth >= tracer.MaxStackDepth {
		return nil, fmt.Errorf("%w: --stack-depth must be between 1 and %d", errUsage, tracer.MaxStackDepth-1)
	}
	k, err := report.ParseSortKey(sortKey)
	if err != nil {
		return nil, fmt.Errorf("%w: --sort: %w", errUsage, err)
	}
	c.Sort = k
	switch {
	case len(c.PIDs) > 0 && len(c.Command) > 0:
		return nil, fmt.Errorf("%w: give -p or a command, not both", errUsage)
	case c.Top < 0:
		return nil, fmt.Errorf("%w: --top must be >= 0", errUsage)
	case c.Duration < 0 || c.Interval < 0:
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
