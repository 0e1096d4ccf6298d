package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/memtrace/memtrace/internal/replay"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// diffCommand is `memtrace diff OLD NEW [flags]`.
func diffCommand(code *int, stdout, stderr io.Writer) *cobra.Command {
	c := &replay.DiffConfig{}
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "compare two runs' reports or recordings, every figure with its change",
		Long: "Compares two runs: OLD and NEW are NDJSON outputs (--json, --json-file, a\n" +
			"dump) or recordings (--record). Processes are matched by command name, call\n" +
			"sites by module file name, function, file, line and offset in the module.\n" +
			"Every figure is shown with its change since OLD, largest change first.",
		Args: exactArgs(2, "memtrace diff takes two reports (memtrace diff OLD NEW [flags])"),
		RunE: func(_ *cobra.Command, args []string) error {
			c.Old, c.New = args[0], args[1]
			// Escaped: dumps and recordings hold names processes chose (textsafe).
			*code = replay.Diff(c, textsafe.NewWriter(stdout), textsafe.NewWriter(stderr))
			return nil
		},
	}
	fs := cmd.Flags()
	addFormatFlags(fs, &c.JSON, &c.Raw, "write process_diff and callsite_diff NDJSON records (docs/json.md)")
	fs.Var(byteSize{n: &c.Growth, set: &c.GrowthSet}, "fail-on-growth", "exit 10 when a process's live bytes grew by more than `BYTES`")
	return cmd
}
