package replay

import (
	"fmt"
	"io"
	"slices"

	"github.com/memtrace/memtrace/access"
	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/pipeline"
	"github.com/memtrace/memtrace/recording"
	"github.com/memtrace/memtrace/report"
)

// shownAccess is an access epoch folded from a recording, to be written
// before the report of index at (reports written in order).
type shownAccess struct {
	at    int
	pid   uint32
	comm  string
	e     access.Epoch
	final bool
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
	sa := shownAccess{at: len(rp.reports), pid: a.PID, comm: a.Comm, e: e, final: a.Final}
	rp.accessLast[a.PID] = sa
	if c.At.kind == "" {
		rp.accessEpochs = append(rp.accessEpochs, sa)
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
	epochs := rp.accessEpochs
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
func (rp *replayed) latestAccess() []shownAccess {
	out := make([]shownAccess, 0, len(rp.accessLast))
	for _, sa := range rp.accessLast {
		out = append(out, sa)
	}
	slices.SortFunc(out, func(a, b shownAccess) int { return int(a.pid) - int(b.pid) })
	return out
}
