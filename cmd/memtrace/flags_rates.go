package main

import (
	"github.com/spf13/pflag"

	"fmt"
	"github.com/memtrace/memtrace/internal/session"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
)

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
		if x%time.Second == 0 {
			s = append(s, strconv.FormatInt(int64(x/time.Second), 10)+"s") // 100s, not 1m40s
		} else {
			s = append(s, x.String())
		}
	}
	return strings.Join(s, ",")
}

func (d durationList) Type() string { return "durations" }

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
func addRateFlags(fs *pflag.FlagSet, c *session.RateConfig) func() error {
	c.HalfLives = slices.Clone(aggregate.DefaultHalfLives)
	fs.Var(durationList{&c.HalfLives}, "half-life", "half-lives `T[,T...]` of the decaying rate averages")
	fs.DurationVar(&c.Period, "period", aggregate.DefaultPeriod, "sampling period `D` of the rate averages; 2^-12 <= period/half-life <= 1-2^-12 for each half-life")
	fs.BoolVar(&c.Watch, "watch", false, "live full-screen view of rates and top call sites (periodic reports when stdout is not a terminal)")
	return func() error {
		slices.Sort(c.HalfLives)
		c.HalfLives = slices.Compact(c.HalfLives)
		switch {
		case len(c.HalfLives) > maxHalfLives:
			return fmt.Errorf("%w: --half-life: at most %d half-lives", errUsage, maxHalfLives)
		case c.Period < minPeriod:
			return fmt.Errorf("%w: --period %v: must be at least %v", errUsage, c.Period, minPeriod)
		}
		if err := aggregate.CheckHalfLives(c.Period, c.HalfLives); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return nil
	}
}
