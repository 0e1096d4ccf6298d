package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/memtrace/memtrace/internal/replay"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// replayCommand is `memtrace replay FILE [flags]`.
func replayCommand(code *int, stdout, stderr io.Writer) *cobra.Command {
	c := &replay.ReplayConfig{}
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "print the reports of a run recorded with --record, or of a moment in it (--at)",
		Long: "Prints the reports the recorded run printed (the same tables or NDJSON,\n" +
			"per call site, each process's at its exit, and its leak check), or, with\n" +
			"--at, one report as of an earlier moment. --pprof, --folded and --html\n" +
			"write the files the live run would have written, as of the same moment.\n" +
			"The leak flags judge the recorded check again (each one not given is the\n" +
			"recorded run's); --fail-on-leak exits 10.",
		Args: exactArgs(1, "memtrace replay takes one recording (memtrace replay FILE [flags])"),
	}
	fs := cmd.Flags()
	var at string
	fs.StringVar(&at, "at", "", "report as of `WHEN`: a time since the start (12.5s), peak, or mark:LABEL[#N] (the Nth mark so labelled)")
	checkReport := addReportFlags(fs, &c.Top, &c.Sort, &c.JSON, &c.Raw, &c.Output)
	fs.BoolVar(&c.Detail, "detail", false, "print each call site's stack (recordings made with --detail)")
	fs.Var(peakTolerance{&c.PeakTol}, "peak-tolerance", "recompute the peak snapshot with tolerance `T` (default: the recorded run's)")
	checkRates := addRateFlags(fs, &c.Rates)
	addSymbolizeFlags(fs, &c.SymbolizeConfig)
	checkExports := addExportFileFlags(fs, &c.ExportFiles)
	checkLeaks := addReplayLeakFlags(fs, c)
	fs.MarkHidden("watch") // a replay has no live view
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		c.File = args[0]
		c.RatesOK = fs.Changed("half-life") || fs.Changed("period")
		c.TolSet = fs.Changed("peak-tolerance")
		if err := checkReport(); err != nil {
			return err
		}
		if err := checkRates(); err != nil {
			return err
		}
		if err := checkExports(); err != nil {
			return err
		}
		if err := checkLeaks(); err != nil {
			return err
		}
		var err error
		if c.At, err = replay.ParseAt(at); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		// Escaped: a recording holds names its processes chose (textsafe).
		*code = replay.Replay(c, textsafe.NewWriter(stdout), textsafe.NewWriter(stderr))
		return nil
	}
	return cmd
}

// exactArgs is cobra.ExactArgs with memtrace's message.
func exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%w: %s", errUsage, msg)
		}
		return nil
	}
}
