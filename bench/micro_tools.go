package bench

import (
	"context"
	"os"
	"path/filepath"
)

// emptyProbes runs mallocfree under the empty BPF programs, attached by PID
// while it waits, at the best placement or at +0.
func (r *runner) emptyProbes(ctx context.Context, threads int, best bool) (microSample, error) {
	e, err := r.emptyProgram()
	if err != nil {
		return microSample{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.microTimeout())
	defer cancel()
	w, err := startWaiting(ctx, r.mallocfree, append(r.pairArgs(threads), "wait")...)
	if err != nil {
		return microSample{}, err
	}
	defer w.stop()
	links, where, err := e.attach(w.pid(), best)
	if err != nil {
		return microSample{}, err
	}
	defer closeLinks(links)
	out, err := w.proceed()
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(out)
	return microSample{pairReport: rep, where: where}, err
}

// emptyProgram loads the empty BPF program once per run.
func (r *runner) emptyProgram() (*emptyProbe, error) {
	if r.empty == nil {
		e, err := loadEmptyProbe()
		if err != nil {
			return nil, err
		}
		r.empty = e
	}
	return r.empty, nil
}

// underMemtrace runs `memtrace --json -o FILE [mode args] -- mallocfree`.
// memtrace starts the program stopped at exec and attaches before it runs;
// mallocfree times only its loop, so start-up and the final report are not
// in the figure.
func (r *runner) underMemtrace(ctx context.Context, threads int, modeArgs []string) (microSample, error) {
	trace := filepath.Join(r.tmp, "micro.ndjson")
	defer os.Remove(trace)
	args := append([]string{"--json", "-o", trace}, modeArgs...)
	args = append(append(args, "--", r.mallocfree), r.pairArgs(threads)...)
	o, err := run(ctx, r.microTimeout(), r.memtrace, args...)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(o.stdout)
	if err != nil {
		return microSample{}, err
	}
	sum, err := readTraceSummary(trace)
	if err != nil {
		return microSample{}, err
	}
	s := microSample{pairReport: rep, trace: &sum}
	// wait4 reports memtrace's CPU time plus that of the program it reaped:
	// the difference is the consumer's (loading, draining, aggregating).
	if own := o.cpu - rep.cpu; sum.events > 0 && own > 0 {
		s.consumerNs = float64(own.Nanoseconds()) / float64(sum.events)
	}
	return s, nil
}

// underHeaptrack runs mallocfree under heaptrack (LD_PRELOAD, no trap).
func (r *runner) underHeaptrack(ctx context.Context, threads int) (microSample, error) {
	data := filepath.Join(r.tmp, "heaptrack")
	defer removeGlob(data + "*")
	args := append([]string{"-o", data, r.mallocfree}, r.pairArgs(threads)...)
	o, err := run(ctx, r.microTimeout(), "heaptrack", args...)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(o.stdout)
	return microSample{pairReport: rep}, err
}

// underMassif runs mallocfree under valgrind's massif (a JIT: every
// instruction pays, not only the allocator's).
func (r *runner) underMassif(ctx context.Context, threads int) (microSample, error) {
	args := append([]string{"--tool=massif", "--massif-out-file=/dev/null", r.mallocfree}, r.pairArgs(threads)...)
	o, err := run(ctx, r.microTimeout(), "valgrind", args...)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(o.stdout)
	return microSample{pairReport: rep}, err
}

func removeGlob(pattern string) {
	matches, _ := filepath.Glob(pattern)
	for _, m := range matches {
		os.Remove(m)
	}
}
