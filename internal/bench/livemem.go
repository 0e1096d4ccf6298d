package bench

import (
	"context"
	"fmt"
)

// liveMemory reads aggregate's BenchmarkLiveMemory: the Go heap a Table
// holds per live block. It is a count, not a timing, so one run suffices.
func (r *runner) liveMemory(ctx context.Context) ([]*Comparison, error) {
	c := &Comparison{ID: "livemem", Title: "memory per live block (aggregate.BenchmarkLiveMemory, whole Table)", Unit: "B/live-block",
		Notes: []string{"Go heap after GC over live blocks; deterministic, so measured once"}}
	sizes := []string{"1M", "5M", "10M"}
	if r.cfg.Quick {
		sizes = sizes[:1]
	}
	bin, err := r.testBinary(ctx, "aggregate")
	if err != nil {
		return nil, err
	}
	r.logf("livemem: %v live blocks", sizes)
	pattern := subBenchmarks("BenchmarkLiveMemory", sizes) + "/^table$"
	m, err := goBench(ctx, bin, pattern, "1x")
	for _, s := range sizes {
		row := c.add(fmt.Sprintf("%s live blocks", s))
		if err != nil {
			row.record(0, err)
		} else {
			row.record(metric(m, "BenchmarkLiveMemory/"+s+"/table", "B/live-block"))
		}
		row.summarize()
	}
	return []*Comparison{c}, nil
}
