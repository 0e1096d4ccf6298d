package pipeline

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// waitPoll: how often a wait runs its idle function (a live run's poll
// of the ring).
const waitPoll = 20 * time.Millisecond

// DefaultDebuginfodWait is how long the reports wait, at most and in all,
// for debug files still downloading from debuginfod (--debuginfod-wait).
const DefaultDebuginfodWait = 30 * time.Second

// Downloads is a run's debuginfod client and what is left of the time the
// reports may wait for it. A nil *Downloads downloads nothing.
type Downloads struct {
	d    *symbolize.Debuginfod
	left time.Duration
	log  *slog.Logger
}

// NewDownloads starts the client of the servers in DEBUGINFOD_URLS, or
// returns nil when there are none or --no-debuginfod is given.
func NewDownloads(c SymbolizeConfig, log *slog.Logger) *Downloads {
	if c.NoDebuginfod {
		return nil
	}
	dc, ok := symbolize.DebuginfodFromEnv(os.Getenv)
	if len(dc.Unsupported) > 0 {
		log.Warn("debuginfod: only http and https servers are asked", "ignored", dc.Unsupported)
	}
	if !ok {
		return nil
	}
	dc.Log = log
	log.Info("debuginfod", "urls", dc.URLs, "cache", dc.CacheDir, "timeout", dc.Timeout)
	return &Downloads{d: symbolize.NewDebuginfod(dc), left: c.DebuginfodWait, log: log}
}

// Client is the client to give the resolver (nil: none).
func (w *Downloads) Client() *symbolize.Debuginfod {
	if w == nil {
		return nil
	}
	return w.d
}

// Wait lets the downloads under way finish before a report, for what is
// left of --debuginfod-wait: called only once tracing is over (or nothing
// is left to trace), so nothing but the report waits. What is not there by
// then is reported without. idle (nil: none) runs every waitPoll while it
// waits: the probes may still write events, and the ring must not fill.
func (w *Downloads) Wait(idle func()) {
	if w == nil {
		return
	}
	n := w.d.Pending()
	if n == 0 {
		return
	}
	if w.left <= 0 {
		w.log.Warn("debuginfod: downloads unfinished, reported without them", "left", n)
		return
	}
	// Ctrl-C or SIGTERM ends the wait, not the run: the report follows.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	w.log.Info("debuginfod: waiting for downloads", "pending", n, "at_most", w.left)
	start := time.Now()
	budget := w.left
	defer func() { w.left = max(budget-time.Since(start), 0) }()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			budget = 0 // and no more waiting
			w.log.Warn("debuginfod: waiting for downloads interrupted, reported without them", "signal", sig)
			return
		case <-tick.C:
		}
		if idle != nil {
			idle()
		}
		if n = w.d.Pending(); n == 0 {
			w.log.Info("debuginfod: downloads done", "took", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) >= budget {
			w.log.Warn("debuginfod: downloads unfinished, reported without them (--debuginfod-wait waits longer)", "left", n, "waited", budget)
			return
		}
	}
}

// Close stops what is still downloading.
func (w *Downloads) Close() {
	if w != nil {
		w.d.Close()
	}
}
