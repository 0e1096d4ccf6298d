package session

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/memtrace/memtrace/report"
)

// dumper writes the numbered dumps of --dump-dir: one NDJSON report per
// epoch, with every call site and the activity since the previous dump.
type dumper struct {
	dir   string
	epoch *report.Epoch // the next dump's
}

// dumpName is the file of dump n.
func dumpName(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("memtrace-%04d.ndjson", n))
}

// dump ends an epoch: it writes the table as it stands as the next dump.
func (s *session) dump(final bool) error {
	d := s.time.dumps
	if d.epoch == nil {
		d.epoch = report.FirstEpoch()
	}
	s.refreshCounts() // lost events, exact counts: as every snapshot has them
	snap := s.snapshotAt(monotonicNow(), final)
	o := report.Options{Top: 0, Sort: s.cfg.Sort, Final: final, Host: s.cfg.Host(), Epoch: d.epoch}
	path := dumpName(d.dir, d.epoch.Number)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = report.WriteJSON(f, snap, s.res, o)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dump %s: %w", path, err)
	}
	s.log.Info("dump", "file", path)
	d.epoch = d.epoch.Next(snap)
	return nil
}
