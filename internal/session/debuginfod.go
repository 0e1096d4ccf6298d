package session

import (
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
)

// DefaultDebuginfodWait is --debuginfod-wait's default (pipeline).
const DefaultDebuginfodWait = pipeline.DefaultDebuginfodWait

// waitDebuginfoAtExit waits for the downloads when the last traced process stops
// at its exit and is about to be leak-checked: its loss records are
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
	// The process is stopped at its exit: what is in the ring came before,
	// and counts.
	s.downloads.Wait(func() {
		if _, err := s.drain.Poll(0, s.apply); err != nil {
			s.log.Warn("drain", "err", err)
		}
	})
}

// waitDebuginfoAtEnd waits for the downloads before the final report. The
// run has ended: what the probes still write (-p targets, the whole host)
// is drained so the ring does not fill, and not counted.
func (s *session) waitDebuginfoAtEnd() {
	s.downloads.Wait(func() { _, _ = s.drain.Poll(0, func(*event.Event) {}) })
}
