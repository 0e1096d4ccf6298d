package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/aggregate"
)

// rateConfig holds the flags of decaying rates and the live view.
type rateConfig struct {
	// halfLives of the decaying averages, shortest first.
	halfLives []time.Duration
	// period is the sampling period: every half-life t must satisfy
	// 2^-12 <= period/t <= 1-2^-12.
	period time.Duration
	// watch shows the live view when stdout is a terminal, and periodic
	// reports otherwise.
	watch bool
}

// maxHalfLives bounds --half-life: the view selects them with keys 1-9.
const maxHalfLives = 9

// minPeriod is the shortest --period accepted.
const minPeriod = time.Millisecond

// durationList parses "1s,10s,100s"; a bare number is seconds.
type durationList struct{ ds *[]time.Duration }

func (d durationList) String() string {
	if d.ds == nil {
		return ""
	}
	var s []string
	for _, x := range *d.ds {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (d durationList) Set(s string) error {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		x, err := time.ParseDuration(f)
		if err != nil {
			secs, ferr := strconv.ParseFloat(f, 64)
			if ferr != nil || secs != secs {
				return fmt.Errorf("not a duration: %q (write e.g. 1s,10s,100s)", f)
			}
			x = time.Duration(secs * float64(time.Second))
		}
		if x <= 0 {
			return fmt.Errorf("half-life %q: must be positive", f)
		}
		out = append(out, x)
	}
	*d.ds = out
	return nil
}

// addRateFlags registers --half-life, --period and --watch on fs, and
// returns the check to run after parsing.
func addRateFlags(fs *flag.FlagSet, c *rateConfig) func() error {
	c.halfLives = slices.Clone(aggregate.DefaultHalfLives)
	fs.Var(durationList{&c.halfLives}, "half-life", "half-lives of the decaying rate averages, comma-separated (default 1s,10s,100s)")
	fs.DurationVar(&c.period, "period", aggregate.DefaultPeriod, "sampling period of the rate averages; 2^-12 <= period/half-life <= 1-2^-12 for each half-life")
	fs.BoolVar(&c.watch, "watch", false, "live full-screen view of rates and top call sites (periodic reports when stdout is not a terminal)")
	return func() error {
		slices.Sort(c.halfLives)
		c.halfLives = slices.Compact(c.halfLives)
		switch {
		case len(c.halfLives) > maxHalfLives:
			return fmt.Errorf("%w: --half-life: at most %d half-lives", errUsage, maxHalfLives)
		case c.period < minPeriod:
			return fmt.Errorf("%w: --period %v: must be at least %v", errUsage, c.period, minPeriod)
		}
		if err := aggregate.CheckHalfLives(c.period, c.halfLives); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return nil
	}
}
