// Command memtrace traces the native allocations of processes with eBPF
// uprobes and reports, per call site, what is live, allocated and freed.
// It parses the command line (cobra and pflag: GNU long options, the
// short ones) and hands the run to package session.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/session"
)

// writeMan, when set (man.go, built with -tags man: `make man`), makes
// this binary the man page generator.
var writeMan func(args []string) int

func main() {
	if writeMan != nil {
		os.Exit(writeMan(os.Args[1:]))
	}
	// The command memtrace starts shares its stdout and stderr (outfile.Patient).
	os.Exit(run(os.Args[1:], os.Stdin, outfile.Patient(os.Stdout), outfile.Patient(os.Stderr)))
}

// run is memtrace minus the process: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := exitOK
	root := rootCommand(args, &code, stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		// Every error cobra returns is the command line's: parsing, or a
		// check of the flags' values.
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return exitUsage
	}
	return code
}

// rootCommand is a trace (no subcommand), with replay, diff, version, help
// and completion under it. A first word that names none of them is the
// command to trace (`memtrace ls`); `memtrace -- help` traces a command
// named help (docs/cli-reserved.md).
func rootCommand(args []string, code *int, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cfg := &session.Config{}
	root := &cobra.Command{
		Use:   "memtrace [flags] [-p PID[,PID...] | -- COMMAND [ARGS...]]",
		Short: "trace a native process's allocations with eBPF",
		Long: "memtrace traces a native process's allocations with eBPF and reports, per\n" +
			"call site, what is live, allocated and freed.\n\nModes:\n\n    " + usageLines +
			"\n\nA first word that names a command below runs it; any other starts a\n" +
			"command to trace. `memtrace -- WORD` traces a program named like a command.",
		Args:          cobra.ArbitraryArgs, // the command, after -- (or after the flags)
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.Version = buildVersion() // --version
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	fs := root.Flags()
	// Flags end at the command's name: its own flags are its.
	fs.SetInterspersed(false)
	check := traceFlags(fs, cfg)
	root.RunE = func(_ *cobra.Command, command []string) error {
		if err := check(command); err != nil {
			return err
		}
		*code = session.Run(cfg, args, stdin, stdout, stderr)
		return nil
	}
	root.AddCommand(replayCommand(code, stdout, stderr), diffCommand(code, stdout, stderr), versionCommand(stdout))
	addCompletions(root) // completion.go
	return root
}
