package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Row names of the micro tables; relate() and the targets refer to them.
const (
	rowUntraced = "untraced"
	rowFloor    = "floor"
	rowNaive    = "naive (+0)"
	rowHeaptr   = "heaptrack"
	rowMassif   = "valgrind massif"
)

// memtraceMode is one way of running memtrace in the micro tables.
type memtraceMode struct {
	name string
	args []string
	// xFloor is the target: overhead at most this multiple of the floor's (0: none).
	xFloor float64
}

// memtraceModes are memtrace's rows. --detail and sampled mode get theirs
// here when the flags exist, for example
//
//	{name: "memtrace --detail", args: []string{"--detail"}},
//	{name: "memtrace sampled", args: []string{"--sample", "64"}},
var memtraceModes = []memtraceMode{
	// The target: exact tracing within 10% of the empty probes.
	{name: "memtrace exact", xFloor: 1.10},
}

// microSample is one run of mallocfree under one variant.
type microSample struct {
	pairReport
	trace *traceSummary // memtrace rows only
	// consumerNs is memtrace's own CPU time per event (memtrace rows only).
	consumerNs float64
	// where the probes went (floor and naive rows).
	where string
}

type microVariant struct {
	name string
	// skip says why the variant cannot run here ("" when it can).
	skip string
	run  func(ctx context.Context, threads int) (microSample, error)
	mode *memtraceMode
}

// micro runs the single-threaded table, then one per extra thread count.
func (r *runner) micro(ctx context.Context) ([]*Comparison, error) {
	var out []*Comparison
	for _, t := range append([]int{1}, r.cfg.Threads...) {
		out = append(out, r.microTable(ctx, t))
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

func (r *runner) microVariants() []microVariant {
	noTool := func(name string) string {
		if tool(name) == "" {
			return name + " not installed (membench --install)"
		}
		return ""
	}
	vs := []microVariant{
		{name: rowUntraced, run: r.untraced},
		{name: rowFloor, skip: r.noBPF, run: func(ctx context.Context, t int) (microSample, error) { return r.emptyProbes(ctx, t, true) }},
		{name: rowNaive, skip: r.noBPF, run: func(ctx context.Context, t int) (microSample, error) { return r.emptyProbes(ctx, t, false) }},
	}
	for i := range memtraceModes {
		m := &memtraceModes[i]
		vs = append(vs, microVariant{name: m.name, skip: r.noBPF, mode: m,
			run: func(ctx context.Context, t int) (microSample, error) { return r.underMemtrace(ctx, t, m.args) }})
	}
	vs = append(vs,
		microVariant{name: rowHeaptr, skip: noTool("heaptrack"), run: r.underHeaptrack},
		microVariant{name: rowMassif, skip: noTool("valgrind"), run: r.underMassif},
	)
	return vs
}

func (r *runner) microTable(ctx context.Context, threads int) *Comparison {
	c := &Comparison{
		ID:       fmt.Sprintf("micro-%dt", threads),
		Title:    fmt.Sprintf("malloc(64)+free, %d thread(s), %d pairs: ns per pair", threads, r.cfg.Pairs),
		Unit:     "ns/pair",
		Baseline: rowUntraced,
		Notes: []string{
			"floor: empty BPF programs on malloc entry+return and free entry at tracer.Place's offsets; naive: the same at +0",
			"overhead = median - untraced median; x floor = overhead / floor's overhead",
		},
	}
	if threads > 1 {
		c.Notes = append(c.Notes, "ns/pair is wall time over all threads' pairs (throughput, not latency)")
	}
	type active struct {
		v   microVariant
		row *Row
	}
	var todo []active
	for _, v := range r.microVariants() {
		if v.skip != "" {
			c.skip(v.name, v.skip)
			continue
		}
		todo = append(todo, active{v, c.add(v.name)})
	}
	consumer := map[*Row][]float64{}
	for round := range r.cfg.Rounds {
		// Rotate the order each round, so that no variant always follows
		// the same neighbour's tail (heaptrack's interpreter, a report).
		for i := range todo {
			a := todo[(i+round)%len(todo)]
			r.logf("micro %d thread(s): round %d/%d: %s", threads, round+1, r.cfg.Rounds, a.v.name)
			s, err := a.v.run(ctx, threads)
			if ctx.Err() != nil {
				return c
			}
			a.row.record(s.nsPerPair, err)
			if err != nil {
				continue
			}
			if s.where != "" && a.row.Note == "" {
				a.row.Note = "probes at " + s.where
			}
			if s.trace != nil {
				a.row.Lost = append(a.row.Lost, s.trace.lost)
				if s.consumerNs > 0 {
					consumer[a.row] = append(consumer[a.row], s.consumerNs)
				}
			}
		}
	}
	for _, a := range todo {
		a.row.summarize()
		if xs := consumer[a.row]; len(xs) > 0 {
			a.row.ConsumerNsPerEvent = ptr(median(xs))
		}
	}
	c.relate(rowFloor)
	for _, a := range todo {
		if m := a.v.mode; m != nil && m.xFloor > 0 && a.row.XFloor != nil {
			a.row.Target = fmt.Sprintf("<= %.2fx floor", m.xFloor)
			a.row.Met = ptr(*a.row.XFloor <= m.xFloor)
		}
	}
	return c
}

// microTimeout bounds one run: generous for valgrind and the +0 probes
// (about 7 µs per pair) on a loaded machine.
func (r *runner) microTimeout() time.Duration {
	return 60*time.Second + time.Duration(r.cfg.Pairs)*40*time.Microsecond
}

func (r *runner) pairArgs(threads int) []string {
	return []string{strconv.FormatInt(r.cfg.Pairs, 10), strconv.Itoa(threads)}
}

func (r *runner) untraced(ctx context.Context, threads int) (microSample, error) {
	o, err := run(ctx, r.microTimeout(), r.mallocfree, r.pairArgs(threads)...)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(o.stdout)
	return microSample{pairReport: rep}, err
}
