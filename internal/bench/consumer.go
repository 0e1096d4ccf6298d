package bench

import (
	"context"
	"fmt"
)

// consumerRow is one consumer benchmark: which test binary, which benchmark.
type consumerRow struct {
	name, pkg, bench string
}

var consumerRows = []consumerRow{
	{"ring read + decode + aggregate", "bench", "BenchmarkRingDecodeApply"},
	{"decode + aggregate (from memory)", "bench", "BenchmarkDecodeApply"},
	{"aggregate only (aggregate.BenchmarkApply, mixed stream)", "aggregate", "BenchmarkApply"},
	{"replay: read a recording + aggregate (recording.BenchmarkReplay)", "recording", "BenchmarkReplay"},
}

// consumerPackages are the test binaries the consumer rows come from, and
// the benchmarks each runs.
var consumerPackages = []struct{ pkg, pattern string }{
	{"bench", "^Benchmark(Ring)?DecodeApply$"},
	{"aggregate", "^BenchmarkApply$"},
	{"recording", "^BenchmarkReplay$"},
}

// consumer measures memtrace's reader on one core: events/s decoded and
// aggregated, and a recording replayed. Rounds alternate between the test
// binaries.
func (r *runner) consumer(ctx context.Context) ([]*Comparison, error) {
	c := &Comparison{ID: "consumer", Title: "consumer throughput on one core (GOMAXPROCS=1)", Unit: "events/s",
		Notes: []string{
			"bench's stream: malloc/free churn, 16384 blocks live, 4000 call sites; decoding is a copy of tracer's (tracer exports no decoder)",
		}}
	bins := map[string]string{}
	for _, cp := range consumerPackages {
		bin, err := r.testBinary(ctx, cp.pkg)
		if err != nil {
			return nil, err
		}
		bins[cp.pkg] = bin
	}
	rows := map[string]*Row{}
	for _, cr := range consumerRows {
		if cr.bench == "BenchmarkRingDecodeApply" && r.noBPF != "" {
			c.skip(cr.name, r.noBPF)
			continue
		}
		rows[cr.bench] = c.add(cr.name)
	}
	benchtime := ""
	if r.cfg.Quick {
		benchtime = "200ms"
	}
	for round := range r.cfg.Rounds {
		for _, cp := range consumerPackages {
			pkg := cp.pkg
			r.logf("consumer: round %d/%d: %s", round+1, r.cfg.Rounds, pkg)
			m, err := goBench(ctx, bins[pkg], cp.pattern, benchtime)
			if ctx.Err() != nil {
				return []*Comparison{c}, nil
			}
			for _, cr := range consumerRows {
				row := rows[cr.bench]
				if row == nil || cr.pkg != pkg {
					continue
				}
				if err != nil {
					row.record(0, err)
					continue
				}
				row.record(metric(m, cr.bench, "events/s"))
			}
		}
	}
	for _, row := range c.Rows {
		row.summarize()
	}
	return []*Comparison{c}, nil
}

// noteConsumerHeadroom relates the consumer's rate to the event rate one
// thread produces under memtrace: how many such threads one core keeps up with.
func noteConsumerHeadroom(res *Results) {
	var micro, cons *Comparison
	for _, c := range res.Comparisons {
		switch c.ID {
		case "micro-1t":
			micro = c
		case "consumer":
			cons = c
		}
	}
	if micro == nil || cons == nil {
		return
	}
	mt, ring := micro.row(memtraceModes[0].name), cons.row(consumerRows[0].name)
	if mt == nil || ring == nil || mt.Status != StatusOK || ring.Status != StatusOK || mt.Median == 0 {
		return
	}
	produced := 2e9 / mt.Median // two events per pair
	cons.Notes = append(cons.Notes, fmt.Sprintf(
		"one thread traced by memtrace produces %s events/s (2 per pair at %.0f ns/pair): one consumer core keeps up with %.1f such threads",
		num(produced), mt.Median, ring.Median/produced))
}
