package replay

import (
	"fmt"
	"io"
	"slices"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
)

// streamed is a record the live run's --json wrote as it happened, to
// be written before the report of index at (reports are written in
// order): an access epoch folded from the recording, or with mark set a
// mark.
type streamed struct {
	at    int
	pid   uint32
	comm  string
	e     access.Epoch
	final bool
	mark  *aggregate.Mark
}

// foldAccess folds an access record with the table as it stands, as the
// live run folded the reading when it took it.
func (rp *replayed) foldAccess(c *ReplayConfig, f *pipeline.AccessFolder, t *aggregate.Table, a *recording.Access) {
	if a.Start {
		delete(rp.accessLast, a.PID) // an exec: the old program's epochs are void
	}
	e, ok := f.Fold(t, a)
	if !ok {
		return
	}
	if rp.history != nil {
		rp.history.Cold(a.PID, e.Process.Cold) // --html's timeline draws a cold line
	}
	sa := streamed{at: len(rp.reports), pid: a.PID, comm: a.Comm, e: e, final: a.Final}
	rp.accessLast[a.PID] = sa
	if c.At.kind == "" {
		rp.stream = append(rp.stream, sa)
	}
}

// writeAccessJSON writes with --json the access records of the epochs
// that ended before report i, as the live run wrote them as each ended.
// With --at, each process's latest epoch up to that moment comes with
// the report of the moment.
func (rp *replayed) writeAccessJSON(c *ReplayConfig, w io.Writer, i int) error {
	if !c.JSON {
		return nil
	}
	epochs := rp.stream
	if c.At.kind != "" {
		if i > 0 || len(rp.reports) > 0 {
			return nil
		}
		epochs = rp.latestAccess()
	}
	for _, sa := range epochs {
		if c.At.kind == "" && sa.at != i {
			continue
		}
		if sa.mark != nil {
			if err := report.WriteMark(w, *sa.mark); err != nil {
				return fmt.Errorf("write mark: %w", err)
			}
			continue
		}
		if err := report.WriteAccess(w, sa.pid, sa.comm, sa.e, rp.res, sa.final); err != nil {
			return fmt.Errorf("write access records: %w", err)
		}
	}
	return nil
}

// writeAccessText writes, without --json, the "memory by access" section
// of each process's latest epoch after the final report, as the live run
// does.
func (rp *replayed) writeAccessText(c *ReplayConfig, w io.Writer) error {
	if c.JSON {
		return nil
	}
	for _, sa := range rp.latestAccess() {
		if err := report.WriteAccessText(w, sa.pid, sa.comm, sa.e, rp.res, report.Options{Top: c.Top, Raw: c.Raw}); err != nil {
			return fmt.Errorf("write access section: %w", err)
		}
	}
	return nil
}

// latestAccess is each process's latest epoch, by pid.
func (rp *replayed) latestAccess() []streamed {
	out := make([]streamed, 0, len(rp.accessLast))
	for _, sa := range rp.accessLast {
		out = append(out, sa)
	}
	slices.SortFunc(out, func(a, b streamed) int { return int(a.pid) - int(b.pid) })
	return out
}
