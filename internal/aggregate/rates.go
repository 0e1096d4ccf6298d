package aggregate

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Decaying rate averages.
//
// For a half-life t, the average rate up to time T of a quantity that grew
// by Δᵢ during the period i (of length dᵢ, ending at tᵢ) is
//
//	Σ 2^(−(T−tᵢ)/t)·Δᵢ / Σ 2^(−(T−tᵢ)/t)·dᵢ
//
// With periods of equal length s this is Σ wᵢ·Δᵢ / (s·Σ wᵢ): the weighted
// mean of the per-period rates Δᵢ/s, normalized by the weights, so it needs
// no warm-up (a constant rate reads as that rate from the first period on).
// Periods of unequal length (a timer that fired late, a report taken between
// two ticks) are weighted by their length, so the average stays exact for
// any partition of time.
//
// Both sums decay by the same factor between updates, which makes lazy
// decay exact: a RateSet that saw nothing for a while only needs its
// numerator multiplied by 2^(−Δt/t) when it is next read or updated. The
// denominator depends only on the tick times, so one RateClock serves every
// RateSet that ticks with it (a process and all its call sites).

// The bounds of period/half-life: 2^-12 ≤ s/t ≤ 1 − 2^-12.
const (
	ratioShift = 12 // s/t ≥ 2^-ratioShift
)

// DefaultHalfLives are the half-lives kept unless told otherwise.
var DefaultHalfLives = []time.Duration{time.Second, 10 * time.Second, 100 * time.Second}

// DefaultPeriod is the default sampling period. It must satisfy the rule for
// every default half-life: 100 ms/1 s = 0.1 and 100 ms/100 s = 0.001 are
// both within [2^-12, 1−2^-12] (1 s itself is not: 1 s/1 s = 1).
const DefaultPeriod = 100 * time.Millisecond

// HalfLifeRange returns the shortest and longest half-life that period
// allows: period/(1−2^-12) rounded up to the nanosecond, and period·2^12
// (capped at the longest time.Duration).
func HalfLifeRange(period time.Duration) (lo, hi time.Duration) {
	if period <= 0 {
		return 0, 0
	}
	s := uint64(period)
	// lo = ceil(4096·s / 4095)
	h, l := bits.Mul64(s, 1<<ratioShift)
	q, r := bits.Div64(h, l, (1<<ratioShift)-1)
	if r != 0 {
		q++
	}
	lo = time.Duration(min(q, math.MaxInt64))
	h, l = bits.Mul64(s, 1<<ratioShift)
	if h != 0 || l > math.MaxInt64 {
		hi = math.MaxInt64
	} else {
		hi = time.Duration(l)
	}
	return lo, hi
}

// PeriodRange returns the periods that allow every half-life in halfLives:
// from the longest half-life·2^-12 (rounded up) to the shortest
// half-life·(1−2^-12) (rounded down). ok is false when there is none.
func PeriodRange(halfLives []time.Duration) (lo, hi time.Duration, ok bool) {
	if len(halfLives) == 0 {
		return 0, 0, false
	}
	tmin, tmax := halfLives[0], halfLives[0]
	for _, t := range halfLives {
		tmin, tmax = min(tmin, t), max(tmax, t)
	}
	if tmin <= 0 {
		return 0, 0, false
	}
	lo = time.Duration((uint64(tmax) + (1<<ratioShift - 1)) >> ratioShift)
	h, l := bits.Mul64(uint64(tmin), (1<<ratioShift)-1)
	q, _ := bits.Div64(h, l, 1<<ratioShift)
	hi = time.Duration(q)
	return lo, hi, lo <= hi
}

// CheckHalfLife says whether period s and half-life t satisfy
// 2^-12 ≤ s/t ≤ 1 − 2^-12, exactly (in integer nanoseconds). The error
// names the half-life, the period and the half-lives the period allows.
func CheckHalfLife(period, halfLife time.Duration) error {
	if period <= 0 {
		return fmt.Errorf("period %v: must be positive", period)
	}
	if halfLife <= 0 {
		return fmt.Errorf("half-life %v: must be positive", halfLife)
	}
	s, t := uint64(period), uint64(halfLife)
	// s/t ≥ 2^-12  ⇔  4096·s ≥ t;  s/t ≤ 4095/4096  ⇔  4096·s ≤ 4095·t.
	sh, sl := bits.Mul64(s, 1<<ratioShift)
	th, tl := bits.Mul64(t, (1<<ratioShift)-1)
	tooLong := sh == 0 && sl < t
	tooShort := sh > th || (sh == th && sl > tl)
	if !tooLong && !tooShort {
		return nil
	}
	lo, hi := HalfLifeRange(period)
	return fmt.Errorf("half-life %v is out of range for period %v: "+
		"period/half-life must be between 2^-12 and 1-2^-12, so this period allows half-lives from %v to %v",
		halfLife, period, lo, hi)
}

// CheckHalfLives checks every half-life against period (see CheckHalfLife)
// and that there is at least one.
func CheckHalfLives(period time.Duration, halfLives []time.Duration) error {
	if len(halfLives) == 0 {
		return fmt.Errorf("no half-lives: give at least one")
	}
	for _, t := range halfLives {
		if err := CheckHalfLife(period, t); err != nil {
			return err
		}
	}
	return nil
}

// decay is 2^(−dt/halfLife), dt in ns.
func decay(dt uint64, halfLife time.Duration) float64 {
	if dt == 0 {
		return 1
	}
	return math.Exp2(-float64(dt) / float64(halfLife))
}

// Deltas are what a set of counters did during one period.
type Deltas struct {
	AllocBytes, FreedBytes, Allocs, Frees uint64
}

// countersOf is the part of Stats that rates follow: all four only grow.
func countersOf(s Stats) Deltas {
	return Deltas{AllocBytes: s.AllocBytes, FreedBytes: s.FreedBytes, Allocs: s.Allocs, Frees: s.Frees}
}

// since is d − base, counter by counter. Counters only grow; a smaller
// value (counters restarted) counts as growth from zero.
func (d Deltas) since(base Deltas) Deltas {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return a
		}
		return a - b
	}
	return Deltas{
		AllocBytes: sub(d.AllocBytes, base.AllocBytes),
		FreedBytes: sub(d.FreedBytes, base.FreedBytes),
		Allocs:     sub(d.Allocs, base.Allocs),
		Frees:      sub(d.Frees, base.Frees),
	}
}

// RateClock keeps the denominators Σ wᵢ·dᵢ (in seconds), one per
// half-life, and the time of the last tick. Every RateSet read or updated
// with a clock must have been updated only with that clock.
type RateClock struct {
	halfLives []time.Duration
	den       []float64
	at        uint64 // ns of the last tick
}

// NewRateClock starts a clock at start (ns) with no period yet.
func NewRateClock(halfLives []time.Duration, start uint64) *RateClock {
	c := &RateClock{}
	c.reset(halfLives, start)
	return c
}

func (c *RateClock) reset(halfLives []time.Duration, start uint64) {
	c.halfLives = append([]time.Duration(nil), halfLives...)
	c.den = make([]float64, len(halfLives))
	c.at = start
}

// HalfLives returns the clock's half-lives (do not modify).
func (c *RateClock) HalfLives() []time.Duration { return c.halfLives }

// Time is the end of the last period (ns).
func (c *RateClock) Time() uint64 { return c.at }

// Advance ends a period at now: it decays the denominators to now and adds
// the period's length. A now not after the last tick does nothing and
// returns false.
func (c *RateClock) Advance(now uint64) bool {
	if now <= c.at {
		return false
	}
	dt := now - c.at
	for i, t := range c.halfLives {
		c.den[i] = c.den[i]*decay(dt, t) + float64(dt)/1e9
	}
	c.at = now
	return true
}

// restart forgets the history of half-life i (its value becomes t): the
// average starts afresh at the clock's time. RateSets must drop their
// numerator i too (RateSet.restart).
func (c *RateClock) restart(i int, t time.Duration) {
	c.halfLives[i] = t
	c.den[i] = 0
}

// nums is one half-life's numerators Σ wᵢ·Δᵢ, one per counter.
type nums [4]float64

// RateSet holds the decaying numerators of one set of counters (a process
// or a call site), one group per half-life of its clock, as they were at
// time at: reading or updating it later decays them to the clock's time
// first, which is exact.
type RateSet struct {
	at  uint64
	num []nums
}

// NewRateSet returns a RateSet for c's half-lives, with nothing seen yet.
func NewRateSet(c *RateClock) RateSet {
	return RateSet{at: c.at, num: make([]nums, len(c.halfLives))}
}

// Add accounts for d having happened during the period that ended at the
// clock's last tick (call c.Advance first).
func (r *RateSet) Add(c *RateClock, d Deltas) {
	r.decayTo(c)
	x := nums{float64(d.AllocBytes), float64(d.FreedBytes), float64(d.Allocs), float64(d.Frees)}
	for i := range r.num {
		for k := range x {
			r.num[i][k] += x[k]
		}
	}
}

func (r *RateSet) decayTo(c *RateClock) {
	if len(r.num) != len(c.halfLives) {
		r.num = make([]nums, len(c.halfLives))
		r.at = c.at
		return
	}
	if c.at <= r.at {
		return
	}
	dt := c.at - r.at
	for i, t := range c.halfLives {
		if r.num[i] == (nums{}) {
			continue
		}
		f := decay(dt, t)
		for k := range r.num[i] {
			r.num[i][k] *= f
		}
	}
	r.at = c.at
}

// restart drops numerator i (see RateClock.restart).
func (r *RateSet) restart(i int) {
	if i < len(r.num) {
		r.num[i] = nums{}
	}
}

// Rates returns the averages at the clock's last tick, one per half-life,
// in the clock's order. Before the first period every rate is 0.
func (r *RateSet) Rates(c *RateClock) []RateSnapshot {
	out := make([]RateSnapshot, len(c.halfLives))
	for i, t := range c.halfLives {
		out[i].HalfLife = t
		if c.den[i] <= 0 || i >= len(r.num) {
			continue
		}
		f := 1.0
		if c.at > r.at {
			f = decay(c.at-r.at, t)
		}
		n := r.num[i]
		den := c.den[i]
		out[i].AllocBytesPerSec = n[0] * f / den
		out[i].FreedBytesPerSec = n[1] * f / den
		out[i].NetBytesPerSec = (n[0] - n[1]) * f / den
		out[i].AllocsPerSec = n[2] * f / den
		out[i].FreesPerSec = n[3] * f / den
	}
	return out
}

// RateSnapshot is one half-life's decaying averages, per second: bytes
// allocated, bytes freed, net bytes (allocated − freed, negative when
// memory is being given back), allocation calls and frees.
type RateSnapshot struct {
	HalfLife         time.Duration
	AllocBytesPerSec float64
	FreedBytesPerSec float64
	NetBytesPerSec   float64
	AllocsPerSec     float64
	FreesPerSec      float64
}
