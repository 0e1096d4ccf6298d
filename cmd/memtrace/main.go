// Command memtrace traces the native allocations of processes with eBPF
// uprobes and reports, per call site, what is live, allocated and freed.
// It parses the command line and hands the run to package session.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/memtrace/memtrace/session"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is memtrace minus the process: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "replay":
			return runReplay(args[1:], stdout, stderr) // replay.go
		case "diff":
			return runDiff(args[1:], stdout, stderr) // diff.go
		}
	}
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitUsage
	}
	return session.Run(cfg, args, stdin, stdout, stderr)
}
