// Package session is memtrace's live source: a trace (-p, -- COMMAND, or
// every process on the host) from the probes into the one loop
// (pipeline.Loop), as a pipeline.Source, and the leak check's stops. It
// holds the orchestration only: what is checked, read or decided is in
// the packages that own it (residency, pipeline.FootprintPacer, host's
// policy, pipeline's leak-check blocks). It reaches the kernel through
// small interfaces (probes.go), so that its loop is tested without one.
// cmd/memtrace parses the command line into a Config and calls Run.
package session

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// Run traces as cfg says and returns memtrace's exit code. args is the
// command line, kept in a recording's info.
func Run(cfg *Config, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &session{cfg: cfg, stdin: stdin, stdout: stdout, stderr: stderr,
		backend: kernelBackend{}, hostPIDs: host.PIDs, sigs: make(chan os.Signal, 2)}
	return s.main(args)
}

// main is Run with the session's backend and signals chosen (the tests'
// are synthetic: session_test.go).
func (s *session) main(args []string) int {
	cfg, stdout, stderr := s.cfg, s.stdout, s.stderr
	// memtrace's own text goes through textsafe.Writer: names of traced
	// processes reach it in messages and reports, and must not drive the
	// terminal. A -- command writes to stdout and stderr themselves,
	// untouched.
	diag := textsafe.NewWriter(stderr)
	text := textsafe.NewWriter(stdout)
	level := slog.LevelWarn
	if cfg.Verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(diag, &slog.HandlerOptions{Level: level,
		// A timestamp adds nothing to a tool's diagnostics on a terminal.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}}))

	var out io.Writer = text
	if cfg.Output != "" {
		f, err := outfile.Create(cfg.Output)
		if err != nil {
			fmt.Fprintf(diag, "memtrace: %v\n", err)
			return pipeline.ExitUsage
		}
		defer f.Close()
		out = textsafe.NewWriter(f)
	}
	closeJSON, err := cfg.OpenJSONFile()
	if err != nil {
		fmt.Fprintf(diag, "memtrace: %v\n", err)
		return pipeline.ExitUsage
	}
	defer closeJSON()
	if err := cfg.ExportFiles.Check(); err != nil {
		fmt.Fprintf(diag, "memtrace: %v\n", err)
		return pipeline.ExitUsage
	}
	s.log, s.out, s.stdoutText, s.diag = log, out, text, diag
	if err := s.openTime(args); err != nil { // --record, --dump-dir (timeline.go)
		fmt.Fprintf(diag, "memtrace: %v\n", err)
		return pipeline.ExitUsage
	}
	s.newState()
	var src pipeline.Source = s // the live source, into the one loop
	err = src.Run(s.input.Feed)
	code := s.code
	if err == nil {
		err = s.closeTime(true) // the last dump, the end of the recording
	} else {
		s.closeTime(false)
	}
	if err != nil {
		fmt.Fprintf(diag, "memtrace: %v\n", err)
		return exitCodeFor(err)
	}
	return s.leakExitCode(code) // --fail-on-leak (leaks.go)
}
