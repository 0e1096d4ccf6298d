package bench

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"
)

// Row names of the micro tables; relate() and the targets refer to them.
const (
	rowUntraced = "untraced"
	rowFloor    = "floor"
	// rowFloorEntries: the floor without the return probe (entries only).
	rowFloorEntries = "floor, entries only"
	rowNaive        = "naive (+0)"
	rowHeaptrack    = "heaptrack"
	rowMassif       = "valgrind massif"
)

// memtraceMode is one way of running memtrace in the micro tables.
type memtraceMode struct {
	name string
	args []string
	// xFloor is the target: overhead at most this multiple of the floor's (0: none).
	xFloor float64
	// floor is the row xFloor is relative to ("": rowFloor, three traps).
	floor string
	// env selects mallocfree's variant (MALLOCFREE_DEPTH, MALLOCFREE_NEW).
	env []string
}

// memtraceModes are memtrace's rows.
var memtraceModes = []memtraceMode{
	// The target: exact tracing within 10% of the empty probes.
	{name: "memtrace exact", xFloor: 1.10},
	// Whole stacks: a stack walk per allocation; target 1.5x the floor.
	{name: "memtrace --detail", args: []string{"--detail"}, xFloor: 1.5},
	// Exact, and every event written to a recording (compressed; the file
	// is /dev/null so that only the encoding and compression count).
	{name: "memtrace --record", args: []string{"--record", "/dev/null"}},
	// Sampled: the traps remain, the events mostly do not; each sample's
	// stack is unwound (target 1.1x the floor).
	// Where the kernel has uprobe sessions (6.13+), an allocation that is
	// not sampled takes one trap: held to the two-trap floor.
	{name: "memtrace sampled 512K", args: []string{"--sample-bytes", "512K"}, xFloor: 1.1, floor: rowFloorEntries},
	{name: "memtrace sampled 64K", args: []string{"--sample-bytes", "64K"}, xFloor: 1.1},
	// Unwinding through 12 frames without frame pointers, every allocation
	// (target 2.5x the floor) or sampled ones only (target 1.1x), with
	// and without --detail (the same walk; only the tables differ).
	{name: "memtrace --detail, 12 frames", args: []string{"--detail"}, xFloor: 2.5, env: []string{"MALLOCFREE_DEPTH=12"}},
	{name: "memtrace sampled 64K, 12 frames", args: []string{"--sample-bytes", "64K"}, xFloor: 1.1, env: []string{"MALLOCFREE_DEPTH=12"}},
	{name: "memtrace sampled 64K --detail, 12 frames", args: []string{"--sample-bytes", "64K", "--detail"}, xFloor: 1.1, env: []string{"MALLOCFREE_DEPTH=12"}},
	// operator new/delete: charged to new's caller by the walk, no wrapper
	// probe; target 1.10x memtrace exact's malloc/free overhead.
	{name: "memtrace exact, new/delete", env: []string{"MALLOCFREE_NEW=1"}, xFloor: 1.10, floor: "memtrace exact"},
}

// microSample is one run of mallocfree under one variant.
type microSample struct {
	pairReport
	trace *traceSummary // memtrace rows only
	// consumerNs is memtrace's own CPU time per event, its fixed cost
	// left out (memtrace rows only).
	consumerNs float64
	// own is memtrace's CPU time in the run (memtrace rows only).
	own time.Duration
	// where the probes went (floor and naive rows).
	where string
	// progs is the kernel's count of each BPF program's runs and run time.
	progs map[string]progRun
}

type microVariant struct {
	name string
	// skip says why the variant cannot run here ("" when it can).
	skip string
	run  func(ctx context.Context, j microJob) (microSample, error)
	mode *memtraceMode
	// fraction of the configured pairs it runs: the +0 probes cost 20x
	// the floor, and a long run would spread each round over minutes of
	// the machine's changing load.
	fraction int64
}

// microJob is one run's shape.
type microJob struct {
	threads int
	pairs   int64
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
	vs := []microVariant{
		{name: rowUntraced, run: r.untraced},
		{name: rowFloor, skip: r.noBPF, run: func(ctx context.Context, j microJob) (microSample, error) { return r.emptyProbes(ctx, j, true, true) }},
		{name: rowFloorEntries, skip: r.noBPF, run: func(ctx context.Context, j microJob) (microSample, error) { return r.emptyProbes(ctx, j, true, false) }},
		{name: rowNaive, skip: r.noBPF, fraction: 10, run: func(ctx context.Context, j microJob) (microSample, error) { return r.emptyProbes(ctx, j, false, true) }},
	}
	for i := range memtraceModes {
		m := &memtraceModes[i]
		vs = append(vs, microVariant{name: m.name, skip: r.noBPF, mode: m,
			run: func(ctx context.Context, j microJob) (microSample, error) {
				return r.underMemtrace(ctx, j, m.args, m.env)
			}})
	}
	vs = append(vs, microVariant{name: rowPaused, skip: r.noBPF, run: r.underMemtracePaused})
	vs = append(vs,
		microVariant{name: rowHeaptrack, skip: notInstalled("heaptrack"), run: r.underHeaptrack},
		microVariant{name: rowMassif, skip: notInstalled("valgrind"), run: r.underMassif},
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
			"floor: empty BPF programs on malloc entry+return and free entry at tracer.Place's offsets (three traps); floor, entries only: malloc and free entries (two traps); naive: the three at +0 (a tenth of the pairs)",
			"x floor of sampled 512K: over the two-trap floor; of new/delete: over memtrace exact's overhead",
			"BPF ns/pair: the kernel's run time of each BPF program (kernel.bpf_stats_enabled, on during the bench), per pair; runs/pair × ns/run per program",
			"overhead = median - untraced median; x floor = median over rounds of (variant - untraced) / (floor - untraced), same-round runs",
			"memtrace CPU ns/event: memtrace's own CPU time per event, from a full and a 1000-pair run (start-up and report cancel out)",
			"reader stopped: memtrace -p, SIGSTOPped during the loop (ring sized to hold it all): its overhead over the floor is the BPF programs' work; " +
				"the rest of memtrace exact's is the reader competing for the CPUs",
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
			var s microSample
			tainted, err := r.guard(ctx, func() (err error) {
				s, err = a.v.run(ctx, r.job(threads, a.v.fraction))
				return err
			})
			if ctx.Err() != nil {
				return c
			}
			if err != nil && tainted != "" {
				err = fmt.Errorf("%w (another tracer had uprobes in %s)", err, tainted)
			}
			if err != nil {
				a.row.record(0, err)
				continue
			}
			if tainted != "" {
				a.row.recordTainted(s.nsPerPair, tainted)
				continue
			}
			a.row.recordRound(round, s.nsPerPair)
			if a.row.bpf == nil {
				a.row.bpf = bpfRounds{}
			}
			a.row.bpf.add(s.progs, s.pairs)
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
		a.row.BPF = a.row.bpf.summarize()
		if xs := consumer[a.row]; len(xs) > 0 {
			a.row.ConsumerNsPerEvent = ptr(median(xs))
		}
	}
	c.relate(rowFloor)
	for _, a := range todo {
		if m := a.v.mode; m != nil && m.floor != "" {
			c.relateFloor(a.row, m.floor)
		}
		if m := a.v.mode; m != nil && m.xFloor > 0 && a.row.XFloor != nil {
			a.row.Target = fmt.Sprintf("<= %.2fx %s", m.xFloor, cmp.Or(m.floor, rowFloor))
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

// job is a run of threads threads over the configured pairs, or a
// fraction of them (at least a thousand per thread).
func (r *runner) job(threads int, fraction int64) microJob {
	pairs := r.cfg.Pairs
	if fraction > 1 {
		pairs = max(pairs/fraction, min(pairs, 1000*int64(threads)))
	}
	return microJob{threads: threads, pairs: pairs}
}

func (j microJob) args() []string {
	return []string{strconv.FormatInt(j.pairs, 10), strconv.Itoa(j.threads)}
}

func (r *runner) untraced(ctx context.Context, j microJob) (microSample, error) {
	o, err := run(ctx, r.microTimeout(), r.mallocfree, j.args()...)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(o.stdout)
	return microSample{pairReport: rep}, err
}
