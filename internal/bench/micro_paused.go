package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// rowPaused is the diagnostic row that splits memtrace's overhead over the
// floor in two: the BPF programs' own work (this row's overhead over the
// floor) and the reader competing for the CPUs (the rest).
const rowPaused = "memtrace exact, reader stopped"

// underMemtracePaused attaches `memtrace -p` to mallocfree while it waits,
// stops memtrace (SIGSTOP) while the loop runs and continues it afterwards.
// The ring is sized to hold every event, so nothing is lost and the probes
// do all their usual work; only the reader is missing.
func (r *runner) underMemtracePaused(ctx context.Context, j microJob) (microSample, error) {
	ctx, cancel := context.WithTimeout(ctx, r.microTimeout())
	defer cancel()
	trace := filepath.Join(r.tmp, "paused.ndjson")
	defer os.Remove(trace)
	w, err := startWaiting(ctx, r.mallocfree, append(j.args(), "wait")...)
	if err != nil {
		return microSample{}, err
	}
	defer w.stop()
	t, _, err := startTracing(ctx, r.memtrace, "-v", "--json", "-o", trace,
		"--ring-size", strconv.Itoa(ringFor(j.pairs)), "-p", strconv.Itoa(w.pid()))
	if err != nil {
		return microSample{}, err
	}
	defer t.kill()
	mt := t.cmd.Process.Pid
	if err := syscall.Kill(mt, syscall.SIGSTOP); err != nil {
		return microSample{}, err
	}
	out, err := w.proceed()
	// Continue memtrace whatever happened, or it could not be ended.
	_ = syscall.Kill(mt, syscall.SIGCONT)
	if err != nil {
		return microSample{}, err
	}
	if err := t.wait(ctx); err != nil {
		return microSample{}, err
	}
	rep, err := parsePairReport(out)
	if err != nil {
		return microSample{}, err
	}
	sum, err := readTraceSummary(trace)
	if err != nil {
		return microSample{}, err
	}
	return microSample{pairReport: rep, trace: &sum}, nil
}

// ringFor is the ring size (a power of two, at least memtrace's 64 MiB
// default) that holds two events of 72 bytes per pair, with room to spare
// (a pair's records take 88 bytes with their headers: a 56-byte allocation
// and a 32-byte free).
func ringFor(pairs int64) int {
	need := pairs*2*72 + pairs*2*72/4
	size := 64 << 20
	for int64(size) < need {
		size <<= 1
	}
	return size
}
