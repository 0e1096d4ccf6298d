package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/replay"
	"github.com/memtrace/memtrace/internal/session"
)

// optionalBool is a bool flag that remembers whether it was given.
type optionalBool struct {
	v   *bool
	set *bool
}

func (o optionalBool) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatBool(*o.v)
}
func (o optionalBool) Type() string { return "bool" }
func (o optionalBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("not a boolean: %q", s)
	}
	*o.v, *o.set = b, true
	return nil
}

// failFlag is --fail-on-leak[=BYTES]: alone it means a threshold of 0.
type failFlag struct{ c *session.LeakConfig }

func (f failFlag) String() string { return "" }
func (f failFlag) Type() string   { return "bytes" }
func (f failFlag) Set(s string) error {
	switch s {
	case "true":
		f.c.FailOnLeak, f.c.FailBytes = true, 0
		return nil
	case "false":
		f.c.FailOnLeak = false
		return nil
	}
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	f.c.FailOnLeak, f.c.FailBytes = true, n
	return nil
}

type kindsFlag struct{ k *leakcheck.Kinds }

func (f kindsFlag) String() string {
	if f.k == nil {
		return ""
	}
	return f.k.String()
}
func (f kindsFlag) Type() string { return "kinds" }

func (f kindsFlag) Set(s string) error {
	k, err := leakcheck.ParseKinds(s)
	if err != nil {
		return err
	}
	*f.k = k
	return nil
}

type heuristicsFlag struct{ h *leakcheck.Heuristics }

func (f heuristicsFlag) String() string {
	if f.h == nil {
		return ""
	}
	return f.h.String()
}
func (f heuristicsFlag) Type() string { return "heuristics" }

func (f heuristicsFlag) Set(s string) error {
	h, err := leakcheck.ParseHeuristics(s)
	if err != nil {
		return err
	}
	*f.h = h
	return nil
}

// addLeakFlags registers the leak check's flags on fs and returns the check
// to run after parsing (it needs the target mode).
func addLeakFlags(fs *pflag.FlagSet, c *session.Config) func() error {
	l := &c.LeakConfig
	l.Heuristics = leakcheck.AllHeuristics
	loadSuppressions := addJudgeFlags(fs, l,
		"classify live blocks at exit as definitely/indirectly/possibly lost or still reachable (default on with a command; with -p, when the run ends)",
		"exit 10 when a process's lost bytes (of --leak-kinds) exceed `BYTES` (0 when not given); implies --leak-check and --detail")
	fs.Var(heuristicsFlag{&l.Heuristics}, "leak-check-heuristics", "`HEURISTICS`: interior pointers taken as start pointers, as valgrind's: stdstring,length64,newarray,multipleinheritance, all or none")
	fs.BoolVarP(&l.Follow, "follow", "f", false, "follow the processes the command forks: each is traced and leak-checked at its own exit")
	return func() error {
		if err := loadSuppressions(); err != nil {
			return err
		}
		if l.Follow && len(c.Command) == 0 {
			return fmt.Errorf("%w: -f/--follow needs a command (-- COMMAND)", errUsage)
		}
		if (l.FailOnLeak || l.LeakCheck) && len(c.Command) == 0 && len(c.PIDs) == 0 {
			return fmt.Errorf("%w: the leak check needs a target: -p PID or -- COMMAND", errUsage)
		}
		if l.FailOnLeak {
			if l.LeakCheckSet && !l.LeakCheck {
				return fmt.Errorf("%w: --fail-on-leak needs the leak check (drop --leak-check=false)", errUsage)
			}
			l.LeakCheck = true
			// The lost blocks are printed with their stacks.
			c.Detail = true
		} else if !l.LeakCheckSet {
			l.LeakCheck = len(c.Command) > 0
		}
		if c.SampleBytes > 0 && l.LeakCheck {
			// A sampled trace misses blocks that pointers lead through.
			if l.FailOnLeak || l.LeakCheckSet {
				return fmt.Errorf("%w: the leak check needs every allocation: drop --sample-bytes", errUsage)
			}
			l.LeakCheck = false
		}
		return nil
	}
}

// addReplayLeakFlags registers the leak flags of memtrace replay: those
// that judge the recorded checks. The check itself ran in the live run, so
// --leak-check-heuristics and -f have no say here.
func addReplayLeakFlags(fs *pflag.FlagSet, c *replay.ReplayConfig) func() error {
	loadSuppressions := addJudgeFlags(fs, &c.LeakConfig,
		"show the recorded leak check (default: when the run made one)",
		"exit 10 when a process's lost bytes (of --leak-kinds) exceed `BYTES` (0 when not given; default: the recorded run's)")
	for _, name := range []string{"leak-kinds", "suppressions", "no-default-suppressions"} {
		f := fs.Lookup(name)
		f.DefValue, f.Usage = "", f.Usage+" (default: the recorded run's)"
	}
	return func() error {
		c.LeakSet = replay.ReplayLeakFlags{Kinds: fs.Changed("leak-kinds"), Fail: fs.Changed("fail-on-leak"),
			Suppressions: fs.Changed("suppressions") || fs.Changed("no-default-suppressions")}
		return loadSuppressions()
	}
}

// addJudgeFlags registers the flags a live run and a replay share: whether
// to check, and how the results are judged and written. The function it
// returns reads the suppression files; --json-file is created when the
// run starts (session), not while the flags are checked.
func addJudgeFlags(fs *pflag.FlagSet, l *session.LeakConfig, checkUsage, failUsage string) func() error {
	l.LeakKinds = leakcheck.KindsOf(leakcheck.Definite, leakcheck.Indirect)
	fs.Var(optionalBool{&l.LeakCheck, &l.LeakCheckSet}, "leak-check", checkUsage)
	fs.Lookup("leak-check").NoOptDefVal = "true"
	fs.Var(failFlag{l}, "fail-on-leak", failUsage)
	fs.Lookup("fail-on-leak").NoOptDefVal = "true"
	fs.Var(kindsFlag{&l.LeakKinds}, "leak-kinds", "`KINDS` of leaks --fail-on-leak counts: definite,indirect,possible,reachable, all or none")
	var files []string
	fs.Var(nameList{&files}, "suppressions", "`FILE` of leak:PATTERN suppressions (LeakSanitizer format); repeatable")
	fs.BoolVar(&l.NoDefaultSupp, "no-default-suppressions", false, "do not suppress the C/C++ runtime's own reachable allocations")
	fs.StringVar(&l.JSONFile, "json-file", "", "also write the NDJSON records to `PATH`")
	return func() error {
		for _, f := range files {
			ss, err := leakcheck.ReadSuppressionFile(f)
			if err != nil {
				return fmt.Errorf("%w: --suppressions: %w", errUsage, err)
			}
			l.Suppressions = append(l.Suppressions, ss...)
		}
		if !l.NoDefaultSupp {
			l.Suppressions = append(l.Suppressions, leakcheck.DefaultSuppressions...)
		}
		return nil
	}
}
