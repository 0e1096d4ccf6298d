package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestSharedReportFlags: a trace, a replay and a diff register the flags
// that choose how a report is written once (addReportFlags,
// addFormatFlags), so that they read the same in each --help.
func TestSharedReportFlags(t *testing.T) {
	var code int
	root := rootCommand(nil, &code, nil, io.Discard, io.Discard)
	replay := replayCommand(&code, io.Discard, io.Discard)
	diff := diffCommand(&code, io.Discard, io.Discard)
	tests := []struct {
		flag string
		in   []string // the subcommands that have it besides the root
	}{
		{"top", []string{"replay"}},
		{"sort", []string{"replay"}},
		{"json", []string{"replay"}}, // diff's --json writes other records
		{"raw", []string{"replay", "diff"}},
		{"output", []string{"replay"}},
	}
	for _, tt := range tests {
		want := root.Flags().Lookup(tt.flag)
		if want == nil {
			t.Fatalf("memtrace has no --%s", tt.flag)
		}
		for _, sub := range tt.in {
			fs := replay.Flags()
			if sub == "diff" {
				fs = diff.Flags()
			}
			got := fs.Lookup(tt.flag)
			if got == nil || got.Usage != want.Usage || got.DefValue != want.DefValue || got.Shorthand != want.Shorthand {
				t.Errorf("memtrace %s --%s: %+v, want the root's %+v", sub, tt.flag, got, want)
			}
		}
	}
}

// TestFlagsDoNoIO: checking the flags creates no file; --json-file is
// created when the run starts (and closed when it ends).
func TestFlagsDoNoIO(t *testing.T) {
	dir := t.TempDir()
	jf := filepath.Join(dir, "leaks.ndjson")
	if _, err := parseFlags([]string{"--json-file", jf, "-o", filepath.Join(dir, "out"), "--", "true"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("checking the flags created %v", entries)
	}
}
