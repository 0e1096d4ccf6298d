package main

import (
	"github.com/spf13/pflag"

	"fmt"
	"github.com/memtrace/memtrace/internal/session"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
)

// maxMarks bounds --mark: a mark's function index travels in its attach
// cookie.
const maxMarks = 64

// peakTolerance parses --peak-tolerance: bytes (65536, 64K, 1MiB) or a
// percent of the peak (1%, 0.5%).
type peakTolerance struct{ t *aggregate.PeakTolerance }

func (p peakTolerance) String() string {
	if p.t == nil {
		return ""
	}
	if p.t.PPM > 0 {
		return strconv.FormatFloat(float64(p.t.PPM)/1e4, 'f', -1, 64) + "%"
	}
	return strconv.FormatUint(p.t.Bytes, 10)
}

func (p peakTolerance) Type() string { return "tolerance" }

func (p peakTolerance) Set(s string) error {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(pct, 64)
		if err != nil || v < 0 || v > 100 {
			return fmt.Errorf("not a percentage: %q (write e.g. 1%% or 0.5%%)", s)
		}
		*p.t = aggregate.PeakTolerance{PPM: uint64(v * 1e4)}
		return nil
	}
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*p.t = aggregate.PeakTolerance{Bytes: n}
	return nil
}

// addTimeFlags registers --record, --mark, --peak-tolerance and
// --dump-dir on fs, and returns the check to run after parsing.
func addTimeFlags(fs *pflag.FlagSet, c *session.TimeConfig) func() error {
	c.PeakTol = aggregate.DefaultPeakTolerance
	fs.StringVar(&c.Record, "record", "", "write a recording of the run to `FILE`, for memtrace replay (docs/recording.md)")
	fs.Var(nameList{&c.Marks}, "mark", "probe function `FUNC` of the target (whole host: of every traced process): each call is a mark labelled with its first argument (repeatable)")
	fs.Var(peakTolerance{&c.PeakTol}, "peak-tolerance", "keep a snapshot of the heap within `T` bytes (64K), or percent (0.5%), of its peak")
	fs.StringVar(&c.DumpDir, "dump-dir", "", "write one NDJSON report per epoch (each -i interval, mark, and the end) as `DIR`/memtrace-0001.ndjson, ...")
	fs.DurationVar(&c.Access, "access", 0, "access statistics: live memory touched, written, cold and never touched per call site, read every `EPOCH` (1s) and at each mark (docs/access.md)")
	fs.Lookup("access").NoOptDefVal = "1s"
	fs.IntVar(&c.ColdAfter, "cold-after", access.DefaultColdAfter, "with --access, a page untouched for `N` epochs is cold")
	return func() error {
		if c.Access < 0 || (fs.Changed("access") && c.Access < 10*time.Millisecond) {
			return fmt.Errorf("%w: --access: an epoch of at least 10ms", errUsage)
		}
		if c.ColdAfter < 1 {
			return fmt.Errorf("%w: --cold-after: at least 1 epoch", errUsage)
		}
		if len(c.Marks) > maxMarks {
			return fmt.Errorf("%w: --mark: at most %d functions", errUsage, maxMarks)
		}
		if c.DumpDir != "" {
			if err := checkDumpDir(c.DumpDir); err != nil {
				return fmt.Errorf("%w: --dump-dir: %w", errUsage, err)
			}
		}
		return nil
	}
}

// checkDumpDir fails unless dir is a directory memtrace can write in.
func checkDumpDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("%s: not writable: %w", dir, err)
	}
	return nil
}
