// Command htmlshot photographs an HTML report with headless chromium, as
// the tests load it: htmlshot [-w 1200] [-h 2400] PAGE.html OUT.png. The
// screenshots in docs/exports.md come from scripts/screenshots.sh, which runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/memtrace/memtrace/internal/htmlreport/headless"
)

func main() {
	w := flag.Int("w", 1200, "window width in CSS pixels")
	h := flag.Int("h", 2400, "window height in CSS pixels")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: htmlshot [-w W] [-h H] PAGE.html OUT.png")
		os.Exit(2)
	}
	if err := headless.Screenshot(flag.Arg(0), flag.Arg(1), *w, *h); err != nil {
		fmt.Fprintln(os.Stderr, "htmlshot:", err)
		os.Exit(1)
	}
}
