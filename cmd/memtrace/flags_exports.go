package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/memtrace/memtrace/internal/folded"
	"github.com/memtrace/memtrace/internal/htmlreport"
	"github.com/memtrace/memtrace/internal/metrics"
	"github.com/memtrace/memtrace/internal/session"
)

// addExportFlags registers the export flags on fs; the returned check
// runs after parsing.
func addExportFlags(fs *pflag.FlagSet, c *session.ExportConfig) (check func() error) {
	checkFiles := addExportFileFlags(fs, &c.ExportFiles)
	fs.StringVar(&c.Listen, "listen", "", "serve /metrics (Prometheus) and /debug/pprof/heap on `ADDR` while tracing, e.g. 127.0.0.1:9464")
	fs.BoolVar(&c.ListenPublic, "listen-public", false, "allow --listen on an address other hosts can reach (the data shows what processes do)")
	return func() error {
		if c.Listen != "" {
			// Checked now, so a mistake fails before anything is loaded.
			err := metrics.CheckAddress(c.Listen, c.ListenPublic)
			if errors.Is(err, metrics.ErrNotLoopback) {
				return fmt.Errorf("%w: --listen: %w (add --listen-public to allow it)", errUsage, err)
			}
			if err != nil {
				return fmt.Errorf("%w: --listen: %w", errUsage, err)
			}
		}
		return checkFiles()
	}
}

// addExportFileFlags registers the flags of the export files, which live
// runs and replay share.
func addExportFileFlags(fs *pflag.FlagSet, c *session.ExportFiles) (check func() error) {
	fs.StringVar(&c.PprofFile, "pprof", "", "at the end, write the heap profile to `FILE` (gzipped profile.proto, Go's heap sample types)")
	fs.StringVar(&c.FoldedFile, "folded", "", "at the end, write folded stacks (flamegraph.pl, speedscope) to `FILE`")
	value := fs.String("folded-value", "live", "what --folded counts: live (bytes), allocated (bytes), allocs, or resident (bytes made resident, by who made them resident)")
	fs.StringVar(&c.HTMLFile, "html", "", "at the end, write a self-contained HTML report (timeline, rates, flame graph, heap map, sizes) to `FILE`")
	colors := fs.String("colors", "", "with --html: colour the call sites matching each line's pattern (\"PATTERN COLOR\" per line, in `FILE`)")
	return func() error {
		if *colors != "" && c.HTMLFile == "" {
			return fmt.Errorf("%w: --colors colours the --html report: give --html too", errUsage)
		}
		if *colors != "" {
			f, err := os.Open(*colors)
			if err != nil {
				return fmt.Errorf("%w: --colors: %w", errUsage, err)
			}
			defer f.Close()
			if c.Colors, err = htmlreport.ParseColors(f); err != nil {
				return fmt.Errorf("%w: --colors: %w", errUsage, err)
			}
		}
		v, err := folded.ParseValue(*value)
		if err != nil {
			return fmt.Errorf("%w: --folded-value: %w", errUsage, err)
		}
		c.FoldedValue = v
		return nil
	}
}
