package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/session"
	"github.com/memtrace/memtrace/internal/tracer"
)

// nameList collects repeated string flags.
type nameList struct{ names *[]string }

func (n nameList) String() string { return "" }
func (n nameList) Type() string   { return "name" }
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
func (p pidList) Type() string   { return "pid" }
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

// usageLines head memtrace --help (indented 4: a preformatted block in the
// man page too).
const usageLines = `memtrace [flags] -p PID[,PID...]       attach to running processes
    memtrace [flags] -- COMMAND [ARGS...]  start COMMAND and trace it from its first instruction
    memtrace [flags]                       every process on the host: resident memory (--heap: allocators too, sampled)
    memtrace replay FILE [flags]           print the reports of a run recorded with --record
    memtrace diff OLD NEW [flags]          compare two runs' reports or recordings`

// parseFlags parses a trace's command line (no subcommand) into a Config.
func parseFlags(args []string, stderr io.Writer) (*session.Config, error) {
	c := &session.Config{}
	fs := pflag.NewFlagSet("memtrace", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(false)
	check := traceFlags(fs, c)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := check(fs.Args()); err != nil {
		return nil, err
	}
	return c, nil
}

// maxRingBytes is the largest ring buffer the kernel takes: its size is a
// power of two that fits a map's u32 max_entries.
const maxRingBytes = 1 << 31

// addReportFlags registers the flags that choose how reports are written,
// the same for a trace and a replay: --top, --sort, --json, --raw and -o.
// The check it returns reads --sort and validates --top.
func addReportFlags(fs *pflag.FlagSet, top *int, sort *report.SortKey, json, raw *bool, output *string) func() error {
	var sortKey string
	fs.IntVar(top, "top", report.DefaultTop, "call sites shown per process, processes listed with no target (`N`; 0 = all)")
	fs.StringVar(&sortKey, "sort", "live", "order call sites by `KEY`: live, allocated, allocs, rate; or processes by rss, anon, pss, swap, resident (with no target: by rss unless one of these)")
	addFormatFlags(fs, json, raw, "write NDJSON records (docs/json.md) instead of tables")
	fs.StringVarP(output, "output", "o", "", "write reports to `FILE` instead of stdout")
	return func() error {
		k, err := report.ParseSortKey(sortKey)
		if err != nil {
			return fmt.Errorf("%w: --sort: %w", errUsage, err)
		}
		*sort = k
		if *top < 0 {
			return fmt.Errorf("%w: --top must be >= 0", errUsage)
		}
		return nil
	}
}

// addFormatFlags registers --json and --raw, which a trace, a replay and a
// diff share.
func addFormatFlags(fs *pflag.FlagSet, json, raw *bool, jsonUsage string) {
	fs.BoolVar(json, "json", false, jsonUsage)
	fs.BoolVar(raw, "raw", false, "exact byte counts instead of human units")
}

// traceFlags registers a trace's flags on fs and returns the check to run
// after parsing, given the arguments left (the command).
func traceFlags(fs *pflag.FlagSet, c *session.Config) func(command []string) error {
	fs.VarP(pidList{&c.PIDs}, "pid", "p", "`PID`(s) to trace; repeatable or comma-separated")
	fs.DurationVarP(&c.Duration, "duration", "d", 0, "stop after `D` (0 = until the targets exit or Ctrl-C)")
	fs.DurationVarP(&c.Interval, "interval", "i", 0, "print a report every `D` as well as at the end")
	checkReport := addReportFlags(fs, &c.Top, &c.Sort, &c.JSON, &c.Raw, &c.Output)
	fs.StringVar(&c.Allocator, "allocator", "", "probe the allocator in `FILE` instead of the one the target binds to")
	ringBytes, ringSet := uint64(64<<20), false
	fs.Var(byteSize{&ringBytes, &ringSet, maxRingBytes}, "ring-size", "ring buffer `BYTES`, a power of two (16 MiB with -p and --, 64 MiB with --detail, --record, an export or a Python target, 4 MiB when sampling)")
	fs.BoolVarP(&c.Verbose, "verbose", "v", false, "log what is attached, and where")
	fs.BoolVar(&c.Detail, "detail", false, "group by whole call stack and print each stack under its row")
	fs.BoolVar(&c.JVMPerfMap, "jvm-perfmap", false, "ask each traced JVM (-p, --) for its perf map (jcmd Compiler.perfmap) to name its JIT code; starts the JVM's attach listener thread (docs/runtimes-jit.md)")
	fs.BoolVar(&c.NoPythonFrames, "no-python-frames", false, "charge Python processes' allocations to the interpreter's C functions, not to Python lines (no Python frames read; docs/python.md)")
	fs.IntVar(&c.StackDepth, "stack-depth", 16, "`N` frames per stack with --detail, and per sampled allocation's stack in sampled mode (at most 126)")
	var wrapperFile string
	var extraWrappers []string
	noWrappers := false
	fs.Var(nameList{&extraWrappers}, "wrapper", "also treat function `NAME` as an allocation wrapper (repeatable; C++: mangled, or qualified as os::malloc)")
	fs.StringVar(&wrapperFile, "wrappers", "", "`FILE` of allocation wrapper names, one per line")
	fs.BoolVar(&noWrappers, "no-default-wrappers", false, "do not treat operator new, strdup, asprintf … as wrappers")
	noAuto := false
	var notWrappers []string
	fs.BoolVar(&noAuto, "no-auto-wrappers", false, "do not recognize wrappers by name (zmalloc, xmalloc, g_malloc, sqlite3Malloc, os::malloc, …)")
	fs.Var(nameList{&notWrappers}, "not-wrapper", "never treat function `NAME` as an allocation wrapper (repeatable; C++: mangled, or qualified as os::malloc)")
	checkRates := addRateFlags(fs, &c.RateConfig)
	addSymbolizeFlags(fs, &c.SymbolizeConfig)
	checkHost := addHostFlags(fs, c)
	checkLeaks := addLeakFlags(fs, c)
	checkTime := addTimeFlags(fs, &c.TimeConfig)
	checkExports := addExportFlags(fs, &c.ExportConfig)
	checkTables := addTableFlags(fs, &c.TablesConfig)
	return func(command []string) error {
		c.Command = command
		c.RingBytes = int(ringBytes)
		if ps := uint64(os.Getpagesize()); ringSet && (ringBytes < ps || ringBytes&(ringBytes-1) != 0) {
			return fmt.Errorf("%w: --ring-size %d: must be a power of two of at least %d", errUsage, ringBytes, ps)
		}
		if c.Allocator != "" {
			if _, err := os.Stat(c.Allocator); err != nil {
				return fmt.Errorf("%w: --allocator: %w", errUsage, err)
			}
			// Checked now: a file with no allocator in it was passed over
			// in silence, and the target's own allocator probed instead.
			if _, err := allocator.Bind([]allocator.Module{{Path: c.Allocator, Module: c.Allocator, Exe: true}}); err != nil {
				return fmt.Errorf("%w: --allocator %s: not an ELF file that defines malloc and free", errUsage, c.Allocator)
			}
		}
		if err := checkRates(); err != nil {
			return err
		}
		if !noWrappers {
			c.Wrappers = append(c.Wrappers, allocator.DefaultWrappers...)
		}
		c.Wrappers = append(c.Wrappers, extraWrappers...)
		if wrapperFile != "" {
			names, err := allocator.ReadWrapperFile(wrapperFile)
			if err != nil {
				return fmt.Errorf("%w: --wrappers: %w", errUsage, err)
			}
			c.Wrappers = append(c.Wrappers, names...)
		}
		c.WrapperRule = allocator.NewWrapperRule(c.Wrappers, !noAuto, notWrappers)
		if c.StackDepth < 1 || c.StackDepth >= tracer.MaxStackDepth {
			return fmt.Errorf("%w: --stack-depth must be between 1 and %d", errUsage, tracer.MaxStackDepth-1)
		}
		if err := checkReport(); err != nil {
			return err
		}
		switch {
		case len(c.PIDs) > 0 && len(c.Command) > 0:
			return fmt.Errorf("%w: give -p or a command, not both", errUsage)
		case c.JVMPerfMap && len(c.PIDs) == 0 && len(c.Command) == 0:
			// Asking every JVM on the host would start a thread in each.
			return fmt.Errorf("%w: --jvm-perfmap needs -p or a command: it asks only the JVMs traced", errUsage)
		case c.Duration < 0 || c.Interval < 0:
			return fmt.Errorf("%w: durations must be positive", errUsage)
		}
		if err := checkHost(); err != nil {
			return err
		}
		if err := checkLeaks(); err != nil {
			return err
		}
		if err := checkTime(); err != nil {
			return err
		}
		if err := checkTables(); err != nil {
			return err
		}
		return checkExports()
	}
}
