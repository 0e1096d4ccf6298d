package session

import (
	"log/slog"
	"os"
	"time"

	"github.com/memtrace/memtrace/symbolize"
)

// DefaultDebuginfodWait is how long the final report waits, at most, for
// debug files still downloading from debuginfod (--debuginfod-wait).
const DefaultDebuginfodWait = 30 * time.Second

// debuginfod returns the client of the servers in DEBUGINFOD_URLS, or nil
// when there are none or --no-debuginfod is given.
func (c SymbolizeConfig) debuginfod(log *slog.Logger) *symbolize.Debuginfod {
	if c.NoDebuginfod {
		return nil
	}
	dc, ok := symbolize.DebuginfodFromEnv(os.Getenv)
	if !ok {
		return nil
	}
	dc.Log = log
	log.Info("debuginfod", "urls", dc.URLs, "cache", dc.CacheDir, "timeout", dc.Timeout)
	return symbolize.NewDebuginfod(dc)
}

// waitDebuginfo lets the downloads under way finish before the final
// report, for --debuginfod-wait at most: tracing is over, and nothing but
// the report waits. What is not there by then is reported without.
func waitDebuginfo(d *symbolize.Debuginfod, wait time.Duration, log *slog.Logger) {
	if d == nil {
		return
	}
	start := time.Now()
	if left := d.Wait(wait); left > 0 {
		log.Warn("debuginfod: downloads unfinished, reported without them", "left", left, "waited", wait)
		return
	}
	if took := time.Since(start); took >= time.Millisecond {
		log.Info("debuginfod: waited for downloads", "took", took.Round(time.Millisecond))
	}
}

// waitDebuginfoAtExit waits for the downloads when the last traced process
// stops at its exit and is about to be leak-checked: its loss records are
// resolved then, and with nothing left to trace the wait costs no more
// than the final report's would. With other processes still traced, it
// does not wait: tracing goes on.
func (s *session) waitDebuginfoAtExit(pid int) {
	if !s.cfg.LeakCheck {
		return
	}
	for p, t := range s.targets {
		if p != pid && !t.exited {
			return
		}
	}
	waitDebuginfo(s.debuginfod, s.cfg.DebuginfodWait, s.log)
}

// closeDebuginfo stops what is still downloading (nil: nothing).
func closeDebuginfo(d *symbolize.Debuginfod) {
	if d != nil {
		d.Close()
	}
}
