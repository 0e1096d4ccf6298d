package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportFlags: the export flags' mistakes are usage errors, found
// before anything is loaded.
func TestExportFlags(t *testing.T) {
	colors := filepath.Join(t.TempDir(), "colors")
	os.WriteFile(colors, []byte("grow #00ff00\n"), 0o644)
	tests := []struct {
		args []string
		msg  string // "" = valid
	}{
		{[]string{"--listen", "127.0.0.1:9464"}, ""},
		{[]string{"--listen", "localhost:0"}, ""},
		{[]string{"--listen", ":9464"}, "means every interface: not a loopback address (add --listen-public"},
		{[]string{"--listen", "10.1.2.3:9464"}, "not a loopback address"},
		{[]string{"--listen", "10.1.2.3:9464", "--listen-public"}, ""},
		{[]string{"--listen", "9464"}, "missing port"},
		{[]string{"--html", "r.html", "--colors", colors}, ""},
		{[]string{"--colors", colors}, "give --html too"},
		{[]string{"--html", "r.html", "--colors", colors + ".missing"}, "no such file"},
		{[]string{"--folded", "f", "--folded-value", "allocs"}, ""},
		{[]string{"--folded", "f", "--folded-value", "bytes"}, "want live, allocated, allocs or resident"},
	}
	for _, tt := range tests {
		_, err := parseFlags(append(tt.args, "--", "true"), io.Discard)
		switch {
		case tt.msg == "" && err != nil:
			t.Errorf("%v: %v", tt.args, err)
		case tt.msg != "" && (err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.msg)):
			t.Errorf("%v: error %v, want a usage error saying %q", tt.args, err, tt.msg)
		}
	}
}
