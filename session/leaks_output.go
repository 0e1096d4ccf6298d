package session

import (
	"io"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/report"
)

// writeReport writes a report in the chosen format, then what the leak
// check adds (report.Write).
func (s *session) writeReport(snap aggregate.Snapshot, o report.Options) error {
	k := s.objs.Kernel()
	o.Kernel, o.Attach = k.Release, string(k.Attach)
	var leaks *report.Leaks
	if s.cfg.LeakCheck {
		leaks = s.leaks().shown
	}
	return report.Write(s.cfg.outputs(s.out, s.stderr, s.cfg.JSON), snap, s.res, o, leaks)
}

// outputs are where reports go with these flags.
func (c *LeakConfig) outputs(out, stderr io.Writer, json bool) report.Outputs {
	w := report.Outputs{Out: out, Stderr: stderr, JSON: json}
	if c.JSONFileW != nil { // a nil *os.File is no nil io.Writer
		w.JSONFile = c.JSONFileW
	}
	return w
}
