package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/memtrace/memtrace/diff"
	"github.com/memtrace/memtrace/recording"
	"github.com/memtrace/memtrace/report"
)

// exitGrowth: memtrace diff --fail-on-growth found more growth than allowed
// (the same status as --fail-on-leak).
const exitGrowth = exitLeak

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
	jsonOut := fs.Bool("json", false, "write process_diff and callsite_diff NDJSON records (docs/json.md)")
	raw := fs.Bool("raw", false, "exact byte counts instead of human units")
	var growth uint64
	growthSet := false
	fs.Var(byteSize{&growth, &growthSet}, "fail-on-growth", "exit 10 when a process's live bytes grew by more than BYTES")
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
	var sides [2]diff.Side
	for i, f := range files {
		s, err := readSide(f)
		if err != nil {
			fmt.Fprintf(stderr, "memtrace: %s: %v\n", f, err)
			return exitUsage
		}
		sides[i] = s
	}
	res := diff.Compare(sides[0], sides[1])
	var err error
	if *jsonOut {
		err = diff.WriteJSON(stdout, res)
	} else {
		err = diff.WriteText(stdout, res, *raw)
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitError
	}
	if g := res.Growth(); growthSet && g > int64(growth) {
		fmt.Fprintf(stderr, "memtrace: live bytes grew by %d, more than --fail-on-growth %d\n", g, growth)
		return exitGrowth
	}
	return exitOK
}

// readSide reads one side of a diff: NDJSON, or a recording replayed to
// its end and reported with every call site.
func readSide(path string) (diff.Side, error) {
	f, err := os.Open(path)
	if err != nil {
		return diff.Side{}, err
	}
	defer f.Close()
	head := make([]byte, len(recording.Magic))
	n, _ := io.ReadFull(f, head)
	if string(head[:n]) != recording.Magic {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return diff.Side{}, err
		}
		return diff.ReadNDJSON(f)
	}
	rp, err := replay(&replayConfig{file: path})
	if rp == nil {
		return diff.Side{}, err
	}
	if err != nil && !errors.Is(err, recording.ErrTruncated) {
		return diff.Side{}, err
	}
	var b bytes.Buffer
	if err := report.WriteJSON(&b, rp.snap, rp.res, report.Options{Final: true}); err != nil {
		return diff.Side{}, err
	}
	return diff.ReadNDJSON(&b)
}
