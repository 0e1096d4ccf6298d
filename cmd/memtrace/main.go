// Command memtrace traces the native allocations of processes with eBPF
// uprobes and reports, per call site, what is live, allocated and freed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
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
	level := slog.LevelWarn
	if cfg.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level,
		// A timestamp adds nothing to a tool's diagnostics on a terminal.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}}))

	out := stdout
	if cfg.output != "" {
		f, err := os.Create(cfg.output)
		if err != nil {
			fmt.Fprintf(stderr, "memtrace: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		out = f
	}
	s := &session{cfg: cfg, log: log, out: out, stdin: stdin, stdout: stdout, stderr: stderr}
	if err := s.openTime(args); err != nil { // --record, --dump-dir (timeline.go)
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitUsage
	}
	code, err := s.run()
	if err == nil {
		err = s.closeTime() // the last dump, the end of the recording
	} else {
		s.closeTime()
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitCodeFor(err)
	}
	return s.leakExitCode(code) // --fail-on-leak (leaks.go)
}
