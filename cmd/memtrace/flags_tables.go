package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/internal/session"
)

// defaultTablesWait is how long a target's probes wait for the unwind
// tables of its big files (node's 98 MB binary), once its small files'
// (the program, libc) are in: those are always waited for, so that a
// small program is charged right from its first allocation however
// loaded the machine; a big one's go on building in the background
// (docs/unwinding.md).
const defaultTablesWait = 100 * time.Millisecond

// addTableFlags registers the unwind tables' flags: how long to wait for
// them, and their cache (docs/unwind-cache.md).
func addTableFlags(fs *pflag.FlagSet, c *session.TablesConfig) func() error {
	fs.DurationVar(&c.TablesWait, "tables-wait", defaultTablesWait, "once a target's small files' unwind tables are in, wait at most `D` for its big files' before its probes go on (0 = never wait)")
	noCache := false
	fs.BoolVar(&noCache, "no-cache", false, "neither read nor store unwind tables on disk")
	cacheBytes, cacheSet := uint64(session.DefaultCacheBytes), false
	fs.Var(byteSize{&cacheBytes, &cacheSet, 0}, "cache-size", "keep at most `BYTES` of unwind tables on disk, least recently used evicted")
	return func() error {
		if c.TablesWait < 0 {
			return fmt.Errorf("%w: --tables-wait must be positive", errUsage)
		}
		c.NoCache = noCache
		c.CacheBytes = int64(cacheBytes)
		return nil
	}
}
