package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// startupTarget is the goal for attaching to a running process.
const startupTarget = 200 * time.Millisecond

// startup times `memtrace -p PID -v` from its launch to the stderr line
// with msg=attached, which memtrace logs once every probe is in place.
func (r *runner) startup(ctx context.Context) ([]*Comparison, error) {
	c := &Comparison{ID: "startup", Title: "start-up: launch of `memtrace -p PID -v` to msg=attached", Unit: "ms"}
	if r.memtrace == "" {
		c.skip("memtrace -p", r.noBPF)
		return []*Comparison{c}, nil
	}
	row := c.add("memtrace -p")
	for round := range r.cfg.Rounds {
		r.logf("startup: round %d/%d", round+1, r.cfg.Rounds)
		d, err := r.startupOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		row.record(float64(d.Microseconds())/1000, err)
	}
	row.summarize()
	if row.Status == StatusOK {
		row.Target = fmt.Sprintf("< %d ms", startupTarget.Milliseconds())
		row.Met = ptr(row.Median < float64(startupTarget.Milliseconds()))
	}
	return []*Comparison{c}, nil
}

func (r *runner) startupOnce(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	w, err := startWaiting(ctx, r.mallocfree, "1000", "1", "wait")
	if err != nil {
		return 0, err
	}
	defer w.stop()
	t, took, err := startTracing(ctx, r.memtrace, "-v", "-o", "/dev/null", "-p", strconv.Itoa(w.pid()))
	if err != nil {
		return 0, err
	}
	defer t.kill()
	// Let the target finish, so memtrace ends as it would in use.
	if _, err := w.proceed(); err != nil {
		return 0, err
	}
	if err := t.wait(ctx); err != nil {
		return 0, err
	}
	return took, nil
}
