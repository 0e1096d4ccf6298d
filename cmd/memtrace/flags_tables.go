package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/session"
)

// defaultTablesWait is how long a target's probes wait for its unwind
// tables by default: a small program's come from the cache or are built
// well within it (exact charging from its first allocation); a big one's
// go on building in the background (docs/unwinding.md).
const defaultTablesWait = 100 * time.Millisecond

// addTableFlags registers the unwind tables' flags: how long to wait for
// them, and their cache (docs/unwind-cache.md).
func addTableFlags(fs *pflag.FlagSet, c *session.TablesConfig) func() error {
	fs.DurationVar(&c.TablesWait, "tables-wait", defaultTablesWait, "wait at most `D` for a target's unwind tables before its probes go on (0 = never wait)")
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
