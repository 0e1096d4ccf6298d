package main

import (
	"flag"

	"github.com/memtrace/memtrace/symbolize"
)

// symbolizeConfig holds the flags of symbolization.
type symbolizeConfig struct {
	// debugDirs are the global debug directories (--debug-dir), nil for
	// the default.
	debugDirs []string
}

// addSymbolizeFlags registers --debug-dir on fs.
func addSymbolizeFlags(fs *flag.FlagSet, c *symbolizeConfig) {
	fs.Var(nameList{&c.debugDirs}, "debug-dir", "look for separate debug files (by build-id and .gnu_debuglink) under DIR instead of "+
		symbolize.DefaultDebugDir+"; repeatable, searched in order")
}

// resolverOptions configures the session's symbolize.Resolver.
func (c symbolizeConfig) resolverOptions() []symbolize.Option {
	if c.debugDirs == nil {
		return nil
	}
	return []symbolize.Option{symbolize.WithDebugDirs(c.debugDirs...)}
}
