package main

import (
	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/session"

	"github.com/memtrace/memtrace/symbolize"
)

// addSymbolizeFlags registers --debug-dir on fs.
func addSymbolizeFlags(fs *pflag.FlagSet, c *session.SymbolizeConfig) {
	fs.Var(nameList{&c.DebugDirs}, "debug-dir", "look for separate debug files (by build-id and .gnu_debuglink) under `DIR` instead of "+
		symbolize.DefaultDebugDir+"; repeatable, searched in order")
}
