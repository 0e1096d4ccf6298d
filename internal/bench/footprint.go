package bench

import (
	"context"
	"fmt"
	"os"
)

// footprint reads footprint's BenchmarkRead: what one footprint reading
// costs on a process with 100 000 mappings and on a 10 GiB resident heap
// (1 GiB in --quick), next to the kernel's part alone (reading smaps and
// status without parsing), in the same benchmark binary, one after the
// other.
func (r *runner) footprint(ctx context.Context) ([]*Comparison, error) {
	bin, err := r.testBinary(ctx, "footprint")
	if err != nil {
		return nil, err
	}
	heap, times := "10", "5x"
	if r.cfg.Quick {
		heap, times = "1", "1x"
	}
	os.Setenv("MEMTRACE_BENCH_HEAP_GIB", heap)
	defer os.Unsetenv("MEMTRACE_BENCH_HEAP_GIB")
	r.logf("footprint: readings of 100 000 mappings and of a %s GiB heap", heap)
	m, err := goBench(ctx, bin, "^BenchmarkRead$", times)
	var out []*Comparison
	for _, sub := range []struct{ id, name, title string }{
		{"footprint-maps", "mappings=100000", "a footprint reading, 100 000 mappings (footprint.BenchmarkRead)"},
		{"footprint-heap", "heap=10GiB", "a footprint reading, " + heap + " GiB heap resident in 4 KiB pages (footprint.BenchmarkRead)"},
	} {
		c := &Comparison{ID: sub.id, Title: sub.title, Unit: "ms", Baseline: "smaps and status, unparsed",
			Notes: []string{"above 4096 mappings footprint.Read reads maps and pagemap instead of smaps",
				"memtrace reads a process again only after 100 times its last reading's duration (at most 1% of a core per process); the final report reads afresh"}}
		for _, v := range []struct{ row, bench string }{
			{"smaps and status, unparsed", "kernel"},
			{"footprint.Read", "read"},
		} {
			row := c.add(v.row)
			if err != nil {
				row.record(0, err)
			} else {
				ns, e := metric(m, fmt.Sprintf("BenchmarkRead/%s/%s", sub.name, v.bench), "ns/op")
				row.record(ns/1e6, e)
			}
			row.summarize()
		}
		c.relate("")
		out = append(out, c)
	}
	return out, nil
}
