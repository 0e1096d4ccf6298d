package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/manpage"
)

// TestVersion: --version and `memtrace version` print the same line, and
// `make build` stamps the version and commit it is given into it.
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	make := exec.Command("make", "-C", "../..", "build", "BIN="+bin, "VERSION=v9.8.7-test", "COMMIT=0123456789abcdef")
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	want := regexp.MustCompile(`^memtrace v9\.8\.7-test \(commit 0123456789abcdef, go1\.[0-9.]+\)\n$`)
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := runCmd(t, exec.Command(filepath.Join(bin, "memtrace"), args...))
		if r.code != 0 || !want.MatchString(r.stdout) || r.stderr != "" {
			t.Errorf("memtrace %s: exit %d, stdout %q, stderr %q; want exit 0 and %s", args[0], r.code, r.stdout, r.stderr, want)
		}
	}
	// Without the stamp (go build, as the tests build it): still one line.
	r := runMemtrace(t, "--version")
	if r.code != 0 || !regexp.MustCompile(`^memtrace \S+ \(commit \S+, go1\.[0-9.]+\)\n$`).MatchString(r.stdout) {
		t.Errorf("unstamped --version: exit %d, %q", r.code, r.stdout)
	}
}

// TestHelpCommand: `memtrace help` is memtrace --help, `memtrace help
// replay` the replay's; `memtrace version x` is a usage error that says how
// to trace a command named version.
func TestHelpCommand(t *testing.T) {
	root := runMemtrace(t, "--help")
	tests := []struct {
		args   []string
		code   int
		stdout string // a line it must contain
		stderr string
	}{
		{[]string{"help"}, 0, root.stdout, ""},
		{[]string{"help", "replay"}, 0, "  memtrace replay FILE [flags]", ""},
		{[]string{"help", "diff"}, 0, "  memtrace diff OLD NEW [flags]", ""},
		{[]string{"replay", "--help"}, 0, "  memtrace replay FILE [flags]", ""},
		{[]string{"version", "x"}, exitUsage, "", "memtrace: usage: memtrace version takes no arguments (to trace a command named version: memtrace -- version)\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runMemtrace(t, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stdout, tt.stdout) || r.stderr != tt.stderr {
				t.Errorf("exit %d, stdout:\n%s\nstderr %q; want exit %d, stdout with %q, stderr %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	for _, c := range []string{"completion", "diff", "help", "replay", "version"} {
		if !regexp.MustCompile(`(?m)^  ` + c + ` +\S`).MatchString(root.stdout) {
			t.Errorf("--help lists no %s command:\n%s", c, root.stdout)
		}
	}
}

// TestCompletion: the scripts of the three shells, and what they ask
// memtrace for: -p completes to process IDs described by their names
// (this test's own among them), --sort to its keys.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_memtrace",
		"zsh":  "#compdef memtrace",
		"fish": "complete -c memtrace",
	} {
		r := runMemtrace(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, no %q in:\n%.300s", shell, r.code, want, r.stdout)
		}
	}
	self := fmt.Sprintf("%d\t%s\n", os.Getpid(), strings.TrimSpace(readFile(t, "/proc/self/comm")))
	r := runMemtrace(t, "__complete", "-p", fmt.Sprint(os.Getpid()))
	if r.code != 0 || !strings.HasPrefix(r.stdout, self) || !strings.HasSuffix(r.stdout, "\n:4\n") {
		t.Errorf("-p completion: exit %d, %q; want it to start with %q", r.code, r.stdout, self)
	}
	// A list: its last element completes; 2 (kthreadd) is a kernel thread.
	r = runMemtrace(t, "__complete", "-p", "1,2")
	for l := range strings.Lines(strings.TrimSuffix(r.stdout, ":4\n")) {
		if !strings.HasPrefix(l, "1,2") || strings.HasPrefix(l, "1,2\t") {
			t.Errorf("-p 1,2 completion offers %q", l)
		}
	}
	r = runMemtrace(t, "__complete", "--sort", "")
	if want := "live\nallocated\nallocs\nrate\nrss\n:4\n"; r.stdout != want {
		t.Errorf("--sort completion %q, want %q", r.stdout, want)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestManPages: `make man`'s pages, one per command, each with its flags.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	var code int
	if err := manpage.Write(rootCommand(nil, &code, os.Stdin, io.Discard, io.Discard), "memtrace test", dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ page, want string }{
		{"memtrace.1", `\fB-p\fP, \fB--pid\fP=`},
		{"memtrace.1", `\fB--detail\fP`},
		{"memtrace.1", "memtrace-replay(1)"},
		{"memtrace-replay.1", `\fB--at\fP=`},
		{"memtrace-diff.1", `\fB--fail-on-growth\fP=`},
		{"memtrace-version.1", "memtrace version"},
		{"memtrace-completion-bash.1", "bash"},
	}
	for _, tt := range tests {
		page := readFile(t, filepath.Join(dir, tt.page))
		if !strings.HasPrefix(page, ".nh\n.TH ") || !strings.Contains(page, tt.want) {
			t.Errorf("%s: no %q in:\n%.600s", tt.page, tt.want, page)
		}
	}
}

// TestBareWords: a first word that names no subcommand is the command to
// trace, as before there were subcommands, and `--` makes even a
// subcommand's name a command: both trace a script of that name and exit
// with its status.
func TestBareWords(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	for _, name := range []string{"help", "mtword"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"--", "help"}, {"mtword"}, {"--json", "mtword"}} {
		cmd := exec.Command(memtrace(t), args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		r := runCmd(t, cmd)
		if r.code != 7 || !strings.Contains(r.stdout, "FINAL") && !strings.Contains(r.stdout, `"final":true`) {
			t.Errorf("memtrace %s: exit %d (want the script's 7), stdout:\n%.400s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}
