package session

import (
	"io"

	"github.com/memtrace/memtrace/recording"
	"github.com/memtrace/memtrace/report"
)

// print writes a report with the session's printer (printer.go), to where
// reports go now (the live view holds them while it owns the terminal).
func (s *session) print(r recording.Report) error {
	s.pr.w = s.cfg.outputs(s.out, s.stderr, s.cfg.JSON)
	if s.cfg.LeakCheck {
		s.pr.leaks = s.leaks().shown
	}
	return s.pr.print(r)
}

// outputs are where reports go with these flags.
func (c *LeakConfig) outputs(out, stderr io.Writer, json bool) report.Outputs {
	w := report.Outputs{Out: out, Stderr: stderr, JSON: json}
	if c.JSONFileW != nil { // a nil *os.File is no nil io.Writer
		w.JSONFile = c.JSONFileW
	}
	return w
}
