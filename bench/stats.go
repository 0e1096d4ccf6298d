package bench

import (
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

// summarize turns rounds into the median and spread, and a row with no
// successful round into a failed one.
func (r *Row) summarize() {
	if r.Status != StatusOK {
		return
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

// relate fills every measured row's Ratio and Overhead against the
// baseline row, and XFloor against the floor row when floor is given.
func (c *Comparison) relate(floor string) {
	base := c.row(c.Baseline)
	if base == nil || base.Status != StatusOK || base.Median == 0 {
		return
	}
	var floorOver float64
	if f := c.row(floor); floor != "" && f != nil && f.Status == StatusOK {
		floorOver = f.Median - base.Median
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
		if floorOver > 0 {
			x := over / floorOver
			r.XFloor = &x
		}
	}
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
