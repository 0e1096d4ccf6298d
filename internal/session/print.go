package session

import (
	"github.com/memtrace/memtrace/internal/recording"
)

// print writes a report with the session's printer (pipeline.Printer), to
// where reports go now (the live view holds them while it owns the
// terminal).
func (s *session) print(r recording.Report) error {
	s.requestJVMPerfMaps() // --jvm-perfmap (jvm.go)
	s.pr.W = s.cfg.Outputs(s.out, s.diag, s.cfg.JSON)
	if s.cfg.LeakCheck {
		s.pr.Leaks = s.leaks().Shown
	}
	return s.pr.Print(r)
}
