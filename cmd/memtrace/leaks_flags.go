package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/leakcheck"
)

// leakConfig holds the flags of the leak check (leaks.go).
type leakConfig struct {
	// leakCheck: classify the live blocks when a process exits (and, for
	// -p targets, when the run ends). On by default with a command.
	leakCheck    bool
	leakCheckSet bool
	// failOnLeak: exit with exitLeak when a checked process's lost bytes
	// of leakKinds exceed failBytes.
	failOnLeak bool
	failBytes  uint64
	leakKinds  leakcheck.Kinds
	heuristics leakcheck.Heuristics
	// follow (-f): trace the processes the command forks.
	follow bool
	// suppressions: the user's, then (unless noDefaultSupp) the built-ins.
	suppressions  leakcheck.Suppressions
	noDefaultSupp bool
	// jsonFile: NDJSON written there as well as the human report.
	jsonFile  string
	jsonFileW *os.File
}

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
func (o optionalBool) IsBoolFlag() bool { return true }
func (o optionalBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("not a boolean: %q", s)
	}
	*o.v, *o.set = b, true
	return nil
}

// failFlag is --fail-on-leak[=BYTES]: alone it means a threshold of 0.
type failFlag struct{ c *leakConfig }

func (f failFlag) String() string   { return "" }
func (f failFlag) IsBoolFlag() bool { return true }
func (f failFlag) Set(s string) error {
	switch s {
	case "true":
		f.c.failOnLeak, f.c.failBytes = true, 0
		return nil
	case "false":
		f.c.failOnLeak = false
		return nil
	}
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	f.c.failOnLeak, f.c.failBytes = true, n
	return nil
}

// parseBytes reads "4096", "64k"/"64KiB", "1M"/"1MiB", "1G".
func parseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	low := strings.ToLower(t)
	for _, u := range []struct {
		suffix string
		m      uint64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(low, u.suffix) {
			mult, t = u.m, t[:len(t)-len(u.suffix)]
			break
		}
	}
	n, err := strconv.ParseUint(strings.TrimSpace(t), 10, 64)
	if err != nil || n > ^uint64(0)/mult {
		return 0, fmt.Errorf("not a byte count: %q", s)
	}
	return n * mult, nil
}

type kindsFlag struct{ k *leakcheck.Kinds }

func (f kindsFlag) String() string {
	if f.k == nil {
		return ""
	}
	return f.k.String()
}
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
func addLeakFlags(fs *flag.FlagSet, c *config) func() error {
	l := &c.leakConfig
	l.leakKinds = leakcheck.KindsOf(leakcheck.Definite, leakcheck.Indirect)
	l.heuristics = leakcheck.AllHeuristics
	fs.Var(optionalBool{&l.leakCheck, &l.leakCheckSet}, "leak-check",
		"classify live blocks at exit as definitely/indirectly/possibly lost or still reachable (default on with a command; with -p, when the run ends)")
	fs.Var(failFlag{l}, "fail-on-leak",
		"--fail-on-leak[=BYTES]: exit 10 when a process's lost bytes (of --leak-kinds) exceed BYTES (default 0); implies --leak-check and --detail")
	fs.Var(kindsFlag{&l.leakKinds}, "leak-kinds", "leak classes --fail-on-leak counts: definite,indirect,possible,reachable, all or none (default definite,indirect)")
	fs.Var(heuristicsFlag{&l.heuristics}, "leak-check-heuristics", "interior pointers taken as start pointers, as valgrind's: stdstring,length64,newarray,multipleinheritance, all or none (default all)")
	fs.BoolVar(&l.follow, "f", false, "follow the processes the command forks: each is traced and leak-checked at its own exit")
	fs.BoolVar(&l.follow, "follow", false, "same as -f")
	var files []string
	fs.Var(nameList{&files}, "suppressions", "file of leak:PATTERN suppressions (LeakSanitizer format); repeatable")
	fs.BoolVar(&l.noDefaultSupp, "no-default-suppressions", false, "do not suppress the C/C++ runtime's own reachable allocations")
	fs.StringVar(&l.jsonFile, "json-file", "", "also write the NDJSON records to this file")
	return func() error {
		for _, f := range files {
			ss, err := leakcheck.ReadSuppressionFile(f)
			if err != nil {
				return fmt.Errorf("%w: --suppressions: %w", errUsage, err)
			}
			l.suppressions = append(l.suppressions, ss...)
		}
		if !l.noDefaultSupp {
			l.suppressions = append(l.suppressions, leakcheck.DefaultSuppressions...)
		}
		if l.follow && len(c.command) == 0 {
			return fmt.Errorf("%w: -f/--follow needs a command (-- COMMAND)", errUsage)
		}
		if (l.failOnLeak || l.leakCheck) && len(c.command) == 0 && len(c.pids) == 0 {
			return fmt.Errorf("%w: the leak check needs a target: -p PID or -- COMMAND", errUsage)
		}
		if l.failOnLeak {
			if l.leakCheckSet && !l.leakCheck {
				return fmt.Errorf("%w: --fail-on-leak needs the leak check (drop --leak-check=false)", errUsage)
			}
			l.leakCheck = true
			// The lost blocks are printed with their stacks.
			c.detail = true
		} else if !l.leakCheckSet {
			l.leakCheck = len(c.command) > 0
		}
		if c.sampleBytes > 0 && l.leakCheck {
			// A sampled trace misses blocks that pointers lead through.
			if l.failOnLeak || l.leakCheckSet {
				return fmt.Errorf("%w: the leak check needs every allocation: drop --sample-bytes", errUsage)
			}
			l.leakCheck = false
		}
		if l.jsonFile != "" {
			f, err := os.Create(l.jsonFile)
			if err != nil {
				return fmt.Errorf("%w: --json-file: %w", errUsage, err)
			}
			l.jsonFileW = f
		}
		return nil
	}
}
