// Package manpage writes a command line's man pages (roff, section 1):
// one for the command and one per subcommand, from its cobra commands and
// pflag flags, so that the pages say what --help says. Only `make man`
// and the tests link it; the memtrace binary does not.
package manpage

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Write writes root's pages into dir (made if missing): root.1 and
// root-sub.1 for each subcommand, help and completion included. source
// names the build in each page's footer.
func Write(root *cobra.Command, source, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make man directory: %w", err)
	}
	// Cobra adds help and completion when a command runs; the pages are
	// written without running it.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	disableAutoGenTag(root) // no "Auto generated … on DATE": reproducible pages
	h := &doc.GenManHeader{Section: "1", Source: source, Manual: "memtrace manual"}
	if err := doc.GenManTree(root, h, dir); err != nil {
		return fmt.Errorf("write man pages: %w", err)
	}
	return nil
}

func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, sub := range c.Commands() {
		disableAutoGenTag(sub)
	}
}
