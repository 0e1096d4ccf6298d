package main

import (
	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/session"

	"github.com/memtrace/memtrace/symbolize"
)

// addSymbolizeFlags registers --debug-dir, --no-debuginfod and
// --debuginfod-wait on fs.
func addSymbolizeFlags(fs *pflag.FlagSet, c *session.SymbolizeConfig) {
	fs.Var(nameList{&c.DebugDirs}, "debug-dir", "look for separate debug files (by build-id and .gnu_debuglink) under `DIR` instead of "+
		symbolize.DefaultDebugDir+"; repeatable, searched in order")
	fs.BoolVar(&c.NoDebuginfod, "no-debuginfod", false, "never download debug files from the servers in DEBUGINFOD_URLS")
	fs.DurationVar(&c.DebuginfodWait, "debuginfod-wait", session.DefaultDebuginfodWait,
		"wait at most `D` before the final report for debug files still downloading from debuginfod")
}
