package pipeline

import (
	"fmt"
	"os"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/folded"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/htmlreport"
	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/pprofout"
)

// The export files (--pprof, --folded, --html) a live run writes at its
// end and a replay as of the moment it shows, with the same code.

// MaxExitedStacks bounds the distinct stacks (by comm) of exited
// processes that --pprof and --folded keep in whole-host mode.
const MaxExitedStacks = 50_000

// ExportEnd is the moment the export files show, beyond its snapshot.
type ExportEnd struct {
	Title       string
	Start, Time time.Time // wall clock: the run's start, the moment shown
	// ns is the moment on the history's clock (kernel monotonic ns);
	// blocks lists the live blocks then, for the last heap map.
	NS     uint64
	Blocks history.BlockSource
	// exited: the processes that exited during the run, for --pprof and
	// --folded (nil but in whole-host mode).
	Exited *pprofout.Exited
}

// WriteExportFiles writes --html, --pprof and --folded from snap; h is the
// --html history (nil without --html), given its last sample here. Live
// runs and replay both call it.
func WriteExportFiles(c *ExportFiles, h *history.Collector, snap aggregate.Snapshot, src pprofout.Sources, e ExportEnd) error {
	if h != nil && c.HTMLFile != "" {
		h.End(e.NS, snap, e.Blocks) // the end of the run
		o := htmlreport.Options{Title: e.Title, Colors: c.Colors}
		if err := writeFile(c.HTMLFile, func(f *os.File) error {
			return htmlreport.Write(f, h.History(), snap, src, o)
		}); err != nil {
			return fmt.Errorf("--html: %w", err)
		}
	}
	prof := pprofout.Build(snap, src, pprofout.Options{Time: e.Time, Duration: e.Time.Sub(e.Start), Exited: e.Exited})
	if c.PprofFile != "" {
		if err := writeFile(c.PprofFile, func(f *os.File) error { return prof.Write(f) }); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
	}
	if c.FoldedFile != "" {
		if err := writeFile(c.FoldedFile, func(f *os.File) error { return folded.Write(f, prof, c.FoldedValue) }); err != nil {
			return fmt.Errorf("--folded: %w", err)
		}
	}
	return nil
}

func writeFile(path string, write func(*os.File) error) error {
	f, err := outfile.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
