package bench

import (
	"fmt"
	"slices"
)

// Sections in the order they run.
var Sections = []string{"micro", "startup", "node", "consumer", "livemem", "footprint", "sqlite", "blocks", "heapscale", "redis", "python", "resident", "resident-accuracy", "resident-memory", "hoststart", "access"}

// Config says what to measure and how hard.
type Config struct {
	// Rounds: every comparison runs each variant this many times, taking turns.
	Rounds int `json:"rounds"`
	// Pairs: malloc/free pairs per microbenchmark run (split over threads).
	Pairs int64 `json:"pairs"`
	// Threads: thread counts of the multi-threaded micro tables (1 always runs).
	Threads []int `json:"threads"`
	// Sections to run, from Sections.
	Sections []string `json:"sections"`
	// RedisRequests: redis-benchmark -n.
	RedisRequests int `json:"redis_requests"`
	// Quick: the smoke run the test suite affords.
	Quick bool `json:"quick"`
	// Memtrace is a prebuilt memtrace binary; empty builds ./cmd/memtrace.
	Memtrace string `json:"memtrace,omitempty"`
}

// DefaultConfig is `make bench`: a few minutes on a 2-core machine.
func DefaultConfig() Config {
	return Config{
		Rounds:        5,
		Pairs:         500_000,
		Threads:       []int{2, 8},
		Sections:      slices.Clone(Sections),
		RedisRequests: 100_000,
	}
}

// QuickConfig is a smoke run: every section, small sizes, one round.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Quick = true
	c.Rounds = 1
	c.Pairs = 20_000
	c.RedisRequests = 5_000
	return c
}

func (c Config) validate() error {
	if c.Rounds < 1 {
		return fmt.Errorf("rounds must be at least 1, got %d", c.Rounds)
	}
	if c.Pairs < 1 {
		return fmt.Errorf("pairs must be at least 1, got %d", c.Pairs)
	}
	for _, t := range c.Threads {
		if t < 1 || t > 256 {
			return fmt.Errorf("thread count %d: must be in 1..256", t)
		}
	}
	for _, s := range c.Sections {
		if !slices.Contains(Sections, s) {
			return fmt.Errorf("unknown section %q (known: %v)", s, Sections)
		}
	}
	if c.RedisRequests < 1 {
		return fmt.Errorf("redis requests must be at least 1, got %d", c.RedisRequests)
	}
	return nil
}

func (c Config) has(section string) bool { return slices.Contains(c.Sections, section) }
