package main

import (
	"errors"
	"time"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/internal/session"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// addSymbolizeFlags registers --debug-dir, --no-debuginfod and
// --debuginfod-wait on fs.
func addSymbolizeFlags(fs *pflag.FlagSet, c *session.SymbolizeConfig) {
	fs.Var(nameList{&c.DebugDirs}, "debug-dir", "look for separate debug files (by build-id and .gnu_debuglink) under `DIR` instead of "+
		symbolize.DefaultDebugDir+"; repeatable, searched in order")
	fs.BoolVar(&c.NoDebuginfod, "no-debuginfod", false, "never download debug files from the servers in DEBUGINFOD_URLS")
	c.DebuginfodWait = session.DefaultDebuginfodWait
	fs.Var(waitFlag{&c.DebuginfodWait}, "debuginfod-wait",
		"wait at most `D` before the final report for debug files still downloading from debuginfod")
}

// waitFlag is a duration that must not be negative.
type waitFlag struct{ d *time.Duration }

func (w waitFlag) String() string {
	if w.d == nil {
		return ""
	}
	return w.d.String()
}

func (w waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*w.d = d
	return nil
}

func (waitFlag) Type() string { return "duration" }
