package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// median of xs (0 for none): with noisy neighbours, one slow round must
// not move the figure the way it moves a mean.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// record adds one round's value (or its failure) to the row.
func (r *Row) record(v float64, err error) {
	if err != nil {
		r.errs = append(r.errs, err.Error())
		return
	}
	r.Rounds = append(r.Rounds, v)
}

// recordTainted keeps a round measured while foreign probes were in place
// (at where) apart from the clean ones.
func (r *Row) recordTainted(v float64, where string) {
	r.Tainted = append(r.Tainted, v)
	r.taintedAt = append(r.taintedAt, where)
}

// summarize turns rounds into the median and spread, and a row with no
// successful round into a failed one. Tainted rounds count only when no
// round was clean, and the note says so.
func (r *Row) summarize() {
	if r.Status != StatusOK {
		return
	}
	if len(r.Tainted) > 0 {
		where := strings.Join(uniq(r.taintedAt), ", ")
		if len(r.Rounds) == 0 {
			r.Rounds, r.Tainted, r.Contaminated = r.Tainted, nil, true
			r.Note = joinNotes(r.Note, "CONTAMINATED: every round ran while another tracer had uprobes in "+where)
		} else {
			r.Note = joinNotes(r.Note, fmt.Sprintf("%d round(s) dropped: another tracer had uprobes in %s", len(r.Tainted), where))
		}
	}
	if len(r.Rounds) == 0 {
		r.Status = StatusFailed
		r.Note = strings.Join(uniq(r.errs), "; ")
		return
	}
	r.Median = median(r.Rounds)
	r.Min, r.Max = slices.Min(r.Rounds), slices.Max(r.Rounds)
	if len(r.errs) > 0 {
		r.Note = joinNotes(r.Note, strings.Join(uniq(r.errs), "; ")+" (in some rounds)")
	}
}

// recordRound is record for a clean value of a numbered round, which
// relate can pair with the other rows' values of the same round.
func (r *Row) recordRound(round int, v float64) {
	r.record(v, nil)
	if r.byRound == nil {
		r.byRound = map[int]float64{}
	}
	r.byRound[round] = v
}

// relate fills every measured row's Ratio and Overhead against the
// baseline row, and XFloor against the floor row when floor is given.
func (c *Comparison) relate(floor string) {
	base := c.row(c.Baseline)
	if base == nil || base.Status != StatusOK || base.Median == 0 {
		return
	}
	f := c.row(floor)
	if floor == "" || f == nil || f.Status != StatusOK {
		f = nil
	}
	for _, r := range c.Rows {
		if r == base || r.Status != StatusOK {
			continue
		}
		ratio, over := r.Median/base.Median, r.Median-base.Median
		r.Ratio = &ratio
		if !c.HigherIsBetter {
			r.Overhead = &over
		}
		if f != nil {
			r.XFloorRounds = pairedRatios(r, base, f)
			if len(r.XFloorRounds) > 0 {
				r.XFloor = ptr(median(r.XFloorRounds))
			}
		}
	}
}

// relateFloor sets r's XFloor against another floor row than relate's
// (the two-trap floor, or another variant), or clears it when that row
// has no figures.
func (c *Comparison) relateFloor(r *Row, floor string) {
	base, f := c.row(c.Baseline), c.row(floor)
	r.XFloor, r.XFloorRounds = nil, nil
	if base == nil || f == nil || f.Status != StatusOK || r.Status != StatusOK {
		return
	}
	r.XFloorRounds = pairedRatios(r, base, f)
	if len(r.XFloorRounds) > 0 {
		r.XFloor = ptr(median(r.XFloorRounds))
	}
}

// pairedRatios is (r − base) / (floor − base) for every round all three
// measured cleanly, in round order.
func pairedRatios(r, base, floor *Row) []float64 {
	var out []float64
	for _, round := range slices.Sorted(maps.Keys(r.byRound)) {
		v := r.byRound[round]
		b, ok1 := base.byRound[round]
		fl, ok2 := floor.byRound[round]
		if ok1 && ok2 && fl > b {
			out = append(out, (v-b)/(fl-b))
		}
	}
	return out
}

func uniq(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "; " + b
}

func ptr[T any](v T) *T { return &v }
