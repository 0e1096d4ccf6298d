package main

import (
	"flag"
	"github.com/memtrace/memtrace/session"

	"github.com/memtrace/memtrace/symbolize"
)

// addSymbolizeFlags registers --debug-dir on fs.
func addSymbolizeFlags(fs *flag.FlagSet, c *session.SymbolizeConfig) {
	fs.Var(nameList{&c.DebugDirs}, "debug-dir", "look for separate debug files (by build-id and .gnu_debuglink) under DIR instead of "+
		symbolize.DefaultDebugDir+"; repeatable, searched in order")
}
