package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"
)

// The access section (--access, docs/access.md): what one epoch's reading
// costs memtrace on a large heap, and what 1 s epochs cost a write-heavy
// program (the target: at most 1.05x).

const accessTimeout = 10 * time.Minute

// rewriteLine is writeheavy.c's report of its rewriting alone.
var rewriteLine = regexp.MustCompile(`rewrite ([0-9.]+) s wall ([0-9.]+) s cpu`)

func (r *runner) access(ctx context.Context) ([]*Comparison, error) {
	epoch, err := r.accessEpoch(ctx)
	if err != nil {
		return nil, err
	}
	return append(epoch, r.accessSlowdown(ctx)...), nil
}

// accessEpoch reads tracer/pagewalk's BenchmarkEpoch: clearing, walking,
// pagemap and folding, memtrace's CPU per epoch, on heaps of 1 MiB blocks
// in 4 KiB pages.
func (r *runner) accessEpoch(ctx context.Context) ([]*Comparison, error) {
	c := &Comparison{ID: "access-epoch", Title: "--access: one epoch's reading of a heap of 1 MiB blocks, all resident in 4 KiB pages (pagewalk.BenchmarkEpoch)", Unit: "ms CPU",
		Notes: []string{"memtrace's user + system CPU per epoch: clear_refs 2 and 4, the BPF page-table walk, pagemap, folding the figures; the folding row is wall time of the pure part alone",
			"measured on this machine for 1 GiB: clear_refs ~13 ms, pagemap ~12 ms, the walk ~7 ms; all three grow with the pages mapped"}}
	if r.noBPF != "" {
		c.Notes = append(c.Notes, "skipped: "+r.noBPF)
		return []*Comparison{c}, nil
	}
	sizes := []string{"1GiB", "4GiB", "10GiB"}
	if r.cfg.Quick {
		sizes = []string{"256MiB"}
	} else if memAvailable() < 14<<30 {
		sizes = sizes[:2]
		c.Notes = append(c.Notes, "10 GiB left out: less than 14 GiB available")
	}
	bin, err := r.testBinary(ctx, "tracer/pagewalk")
	if err != nil {
		return nil, err
	}
	pattern := subBenchmarks("BenchmarkEpoch", sizes)
	r.logf("access: epoch readings of %v", sizes)
	m, err := goBench(ctx, bin, pattern, "5x")
	for _, s := range sizes {
		row := c.add(s + " heap")
		if err != nil {
			row.record(0, err)
		} else {
			row.record(metric(m, "BenchmarkEpoch/"+s, "cpu-ms/epoch"))
		}
		row.summarize()
	}
	// The part that grows with the number of blocks: a million small ones.
	row := c.add("folding 1M blocks of 48 B (access.BenchmarkEndSmallBlocks)")
	if bin, err := r.testBinary(ctx, "access"); err != nil {
		row.record(0, err)
	} else if m, err := goBench(ctx, bin, "^BenchmarkEndSmallBlocks$", "5x"); err != nil {
		row.record(0, err)
	} else {
		ns, err := metric(m, "BenchmarkEndSmallBlocks", "ns/op")
		row.record(ns/1e6, err)
	}
	row.summarize()
	return []*Comparison{c}, nil
}

// accessSlowdown times testdata/bench/writeheavy.c's rewriting (its own
// clock, so start-up and reports are left out) untraced, under memtrace,
// and under memtrace --access=1s.
func (r *runner) accessSlowdown(ctx context.Context) []*Comparison {
	mib, passes := "1024", "40"
	if r.cfg.Quick {
		mib, passes = "128", "20"
	}
	title := fmt.Sprintf("--access: writeheavy.c rewriting %s MiB %s times", mib, passes)
	notes := []string{"the program's own clock around its rewriting; the target is at most 1.05x with --access=1s against memtrace without it",
		"each epoch clears the accessed bit of every page; the program's next access to each page must set it again (docs/access.md: measured here, ~90 ms of the program's CPU per GiB it touches, per epoch)"}
	wall := &Comparison{ID: "access-slowdown", Title: title + ": wall time", Unit: "s", Baseline: rowUntraced, Notes: notes}
	cpu := &Comparison{ID: "access-slowdown-cpu", Title: title + ": the program's CPU time", Unit: "s", Baseline: rowUntraced, Notes: notes}
	bin, err := compileC(ctx, r.root, r.tmp, "writeheavy")
	if err != nil {
		wall.Notes = append(wall.Notes, "failed: "+err.Error())
		return []*Comparison{wall, cpu}
	}
	times := func(o output, err error) ([]float64, *traceSummary, error) {
		if err != nil {
			return nil, nil, err
		}
		m := rewriteLine.FindStringSubmatch(o.stderr)
		if m == nil {
			return nil, nil, fmt.Errorf("writeheavy printed no times%s", tail(o.stderr))
		}
		w, _ := strconv.ParseFloat(m[1], 64)
		c, _ := strconv.ParseFloat(m[2], 64)
		return []float64{w, c}, nil, nil
	}
	under := func(name string, args ...string) workloadVariant {
		return workloadVariant{name: name, skip: r.noBPF, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			return times(run(ctx, accessTimeout, r.memtrace, append(append([]string{"-o", os.DevNull}, args...), "--", bin, mib, passes)...))
		}}
	}
	r.alternate(ctx, []*Comparison{wall, cpu}, []workloadVariant{
		{name: rowUntraced, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			return times(run(ctx, accessTimeout, bin, mib, passes))
		}},
		under("memtrace"),
		under("memtrace --access=1s", "--access=1s"),
		// The cost is per epoch: longer epochs cost proportionally less.
		under("memtrace --access=10s", "--access=10s"),
	})
	return []*Comparison{wall, cpu}
}

// memAvailable is /proc/meminfo's MemAvailable in bytes (0 if unknown).
func memAvailable() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`MemAvailable:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return v << 10
}
