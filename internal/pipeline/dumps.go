package pipeline

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/report"
)

// Dumps writes the numbered dumps of --dump-dir: one NDJSON report per
// epoch, with every call site and the activity since the previous dump.
// An epoch ends at each report of -i, each mark and the end of the run.
type Dumps struct {
	Dir  string
	Sort report.SortKey
	Host bool
	// Extra, when set, writes more records at the end of each dump (the
	// access statistics' epochs ended since the previous one).
	Extra func(w io.Writer) error
	epoch *report.Epoch // the next dump's
}

// dumpName is the file of dump n.
func dumpName(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("memtrace-%04d.ndjson", n))
}

// Write ends an epoch: it writes snap, the table as it stands, as the
// next dump, and returns its file.
func (d *Dumps) Write(snap aggregate.Snapshot, res report.Symbolizer, final bool) (string, error) {
	if d.epoch == nil {
		d.epoch = report.FirstEpoch()
	}
	o := report.Options{Top: 0, Sort: d.Sort, Final: final, Host: d.Host, Epoch: d.epoch}
	path := dumpName(d.Dir, d.epoch.Number)
	f, err := outfile.Create(path)
	if err != nil {
		return "", err
	}
	err = report.WriteJSON(f, snap, res, o)
	if err == nil && d.Extra != nil {
		err = d.Extra(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("dump %s: %w", path, err)
	}
	d.epoch = d.epoch.Next(snap)
	return path, nil
}
