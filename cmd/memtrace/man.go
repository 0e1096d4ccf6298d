//go:build man

package main

import (
	"fmt"
	"io"
	"os"

	"github.com/memtrace/memtrace/internal/manpage"
)

// Built with -tags man (`make man`), the binary writes the man pages into
// the directory its argument names, and does nothing else.
func init() {
	writeMan = func(args []string) int {
		if len(args) != 1 {
			fmt.Fprintln(os.Stderr, "memtrace (man): usage: memtrace DIR")
			return exitUsage
		}
		if err := writeManPages(args[0]); err != nil {
			fmt.Fprintf(os.Stderr, "memtrace (man): %v\n", err)
			return exitError
		}
		return exitOK
	}
}

func writeManPages(dir string) error {
	var code int
	root := rootCommand(nil, &code, os.Stdin, io.Discard, io.Discard)
	return manpage.Write(root, buildVersion(), dir)
}
