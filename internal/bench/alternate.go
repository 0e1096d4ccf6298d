package bench

import (
	"context"
	"fmt"
	"slices"
)

// workloadVariant is one way of running a real workload; a run yields one
// value per comparison it feeds (redis: SET and GET).
type workloadVariant struct {
	name string
	skip string
	run  func(ctx context.Context) ([]float64, *traceSummary, error)
}

// alternate runs the variants in turns for the configured rounds, feeding
// each comparison's row of the same name, then relates rows to the
// baseline.
func (r *runner) alternate(ctx context.Context, cs []*Comparison, vs []workloadVariant) {
	rows := make([][]*Row, len(vs)) // [variant][comparison]
	var todo []int
	for i, v := range vs {
		for _, c := range cs {
			if v.skip != "" {
				rows[i] = append(rows[i], c.skip(v.name, v.skip))
			} else {
				rows[i] = append(rows[i], c.add(v.name))
			}
		}
		if v.skip == "" {
			todo = append(todo, i)
		}
	}
	for round := 0; round < r.cfg.Rounds && len(todo) > 0; round++ {
		for k := range todo {
			i := todo[(k+round)%len(todo)]
			r.logf("%s: round %d/%d: %s", cs[0].ID, round+1, r.cfg.Rounds, vs[i].name)
			var vals []float64
			var sum *traceSummary
			tainted, err := r.guard(ctx, func() (err error) {
				vals, sum, err = vs[i].run(ctx)
				return err
			})
			if ctx.Err() != nil {
				return
			}
			if err != nil && tainted != "" {
				err = fmt.Errorf("%w (another tracer had uprobes in %s)", err, tainted)
			}
			for j, row := range rows[i] {
				if err != nil {
					row.record(0, err)
					continue
				}
				if tainted != "" {
					row.recordTainted(vals[j], tainted)
					continue
				}
				row.recordRound(round, vals[j])
				if sum != nil {
					row.Lost = append(row.Lost, sum.lost)
				}
			}
		}
	}
	for _, c := range cs {
		for _, row := range c.Rows {
			row.summarize()
		}
		c.relate("")
	}
}

// firstExisting returns the first path that exists, relative to root.
func firstExisting(root string, paths ...string) string {
	i := slices.IndexFunc(paths, func(p string) bool { return exists(root + "/" + p) })
	if i < 0 {
		return ""
	}
	return paths[i]
}
