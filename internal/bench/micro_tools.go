package bench

import (
	"context"
	"os"
	"path/filepath"
)

// emptyProbes runs mallocfree under the empty BPF programs, attached by PID
// while it waits, at the best placement or at +0.
// returns: malloc's return probe too (three traps), or entries only.
func (r *runner) emptyProbes(ctx context.Context, j microJob, best, returns bool) (microSample, error) {
	e, err := r.emptyProgram()
	if err != nil {
		return microSample{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.microTimeout())
	defer cancel()
	w, err := startWaiting(ctx, r.mallocfree, append(j.args(), "wait")...)
	if err != nil {
		return microSample{}, err
	}
	defer w.stop()
	links, where, err := e.attach(w.pid(), best, returns)
	if err != nil {
		return microSample{}, err
	}
	defer closeLinks(links)
	before, err := programStats(e.prog)
	if err != nil {
		return microSample{}, err
	}
	out, err := w.proceed()
	if err != nil {
		return microSample{}, err
	}
	after, err := programStats(e.prog)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(out)
	progs := map[string]progRun{"empty": {runs: after.runs - before.runs, ns: after.ns - before.ns}}
	return microSample{pairReport: rep, where: where, progs: progs}, err
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
// in the figure. A second, tiny run measures memtrace's fixed CPU cost
// (loading, attaching, reporting), so that the difference gives its CPU
// time per event.
func (r *runner) underMemtrace(ctx context.Context, j microJob, modeArgs, env []string) (microSample, error) {
	tiny, err := r.memtraceOnce(ctx, microJob{threads: j.threads, pairs: 1000 * int64(j.threads)}, modeArgs, env)
	if err != nil {
		return microSample{}, err
	}
	s, err := r.memtraceOnce(ctx, j, modeArgs, env)
	if err != nil {
		return microSample{}, err
	}
	if dn := s.trace.events - tiny.trace.events; dn > 0 && s.own > tiny.own {
		s.consumerNs = float64((s.own - tiny.own).Nanoseconds()) / float64(dn)
	}
	return s, nil
}

// memtraceOnce is one memtrace run of mallocfree.
func (r *runner) memtraceOnce(ctx context.Context, j microJob, modeArgs, env []string) (microSample, error) {
	trace := filepath.Join(r.tmp, "micro.ndjson")
	defer os.Remove(trace)
	// -v: memtrace logs each BPF program's run count and time at the end.
	args := append([]string{"-v", "--json", "-o", trace}, modeArgs...)
	args = append(append(args, "--", r.mallocfree), j.args()...)
	o, err := runEnv(ctx, r.microTimeout(), env, r.memtrace, args...)
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
	// wait4 reports memtrace's CPU time plus that of the program it reaped.
	return microSample{pairReport: rep, trace: &sum, own: o.cpu - rep.cpu, progs: parseBPFPrograms(o.stderr)}, nil
}

// underHeaptrack runs mallocfree under heaptrack (LD_PRELOAD, no trap).
func (r *runner) underHeaptrack(ctx context.Context, j microJob) (microSample, error) {
	data := filepath.Join(r.tmp, "heaptrack")
	defer removeGlob(data + "*")
	args := append([]string{"-o", data, r.mallocfree}, j.args()...)
	o, err := run(ctx, r.microTimeout(), "heaptrack", args...)
	if err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(o.stdout)
	return microSample{pairReport: rep}, err
}

// underMassif runs mallocfree under valgrind's massif (a JIT: every
// instruction pays, not only the allocator's).
func (r *runner) underMassif(ctx context.Context, j microJob) (microSample, error) {
	args := append([]string{"--tool=massif", "--massif-out-file=/dev/null", r.mallocfree}, j.args()...)
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
