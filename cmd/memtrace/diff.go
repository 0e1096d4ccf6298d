package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/memtrace/memtrace/session"
)

const diffUsage = `Usage: memtrace diff OLD NEW [flags]

Compares two runs: OLD and NEW are NDJSON outputs (--json, --json-file, a
dump) or recordings (--record). Processes are matched by command name, call
sites by module file name, function, file, line and offset in the module.
Every figure is shown with its change since OLD, largest change first.

Flags:
`

// runDiff is `memtrace diff`: it returns the exit code.
func runDiff(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("memtrace diff", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &session.DiffConfig{}
	fs.BoolVar(&c.JSON, "json", false, "write process_diff and callsite_diff NDJSON records (docs/json.md)")
	fs.BoolVar(&c.Raw, "raw", false, "exact byte counts instead of human units")
	fs.Var(byteSize{&c.Growth, &c.GrowthSet}, "fail-on-growth", "exit 10 when a process's live bytes grew by more than BYTES")
	var files []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				fmt.Fprint(stderr, diffUsage)
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				return exitOK
			}
			fmt.Fprintf(stderr, "memtrace: usage: %v\n", err)
			return exitUsage
		}
		args = fs.Args()
		if len(args) > 0 {
			files, args = append(files, args[0]), args[1:]
		}
	}
	if len(files) != 2 {
		fmt.Fprintf(stderr, "memtrace: usage: memtrace diff takes two reports (memtrace diff OLD NEW [flags])\n")
		return exitUsage
	}
	c.Old, c.New = files[0], files[1]
	return session.Diff(c, stdout, stderr)
}
