// Package headless runs Debian's chromium without a display to check and
// photograph the HTML report: the tests load the page and read back its
// DOM; docs/exports.md's screenshots come from the same flags.
package headless

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ErrNoChromium: no chromium binary on PATH.
var ErrNoChromium = errors.New("chromium is not installed")

// flags keep chromium to the page: no sandbox (tests run as root), no
// GPU, and none of the background requests a fresh profile makes.
var flags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--enable-logging=stderr", "--v=0"}

// run starts chromium with a fresh profile directory on the file at path.
func run(path string, extra ...string) (stdout, stderr string, err error) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		return "", "", ErrNoChromium
	}
	profile, err := os.MkdirTemp("", "memtrace-chromium-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(profile)
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(append(append([]string{}, flags...), "--user-data-dir="+profile), extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, "file://"+abs)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), errb.String(), fmt.Errorf("chromium: %w\n%s", err, errb.String())
	}
	return out.String(), errb.String(), nil
}

// DumpDOM loads the page, lets its scripts run, and returns the DOM as
// HTML, and chromium's log (console messages included).
func DumpDOM(path string) (dom, log string, err error) {
	return run(path, "--virtual-time-budget=5000", "--dump-dom")
}

// DumpDOMSize is DumpDOM in a window of width x height CSS pixels.
func DumpDOMSize(path string, width, height int) (dom, log string, err error) {
	return run(path, "--virtual-time-budget=5000", fmt.Sprintf("--window-size=%d,%d", width, height), "--dump-dom")
}

// Screenshot writes a PNG of the page, width x height CSS pixels.
func Screenshot(path, png string, width, height int) error {
	abs, err := filepath.Abs(png)
	if err != nil {
		return err
	}
	_, _, err = run(path, "--virtual-time-budget=5000", "--hide-scrollbars",
		fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+abs)
	return err
}
