package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionLine: -ldflags wins, then the module version and the VCS
// revision the toolchain recorded; neither gives "devel" and "unknown".
func TestVersionLine(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	tests := []struct {
		name, v, c string
		bi         *debug.BuildInfo
		want       string
	}{
		{"ldflags", "v1.2.0-3-gabc", "abc123", vcs("fff", "true"), "memtrace v1.2.0-3-gabc (commit abc123, go1.26.8)"},
		{"vcs clean", "", "", vcs("0123abc", "false"), "memtrace devel (commit 0123abc, go1.26.8)"},
		{"vcs dirty", "", "", vcs("0123abc", "true"), "memtrace devel (commit 0123abc-dirty, go1.26.8)"},
		{"go install @version", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.1"}}, "memtrace v0.4.1 (commit unknown, go1.26.8)"},
		{"nothing recorded", "", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, "memtrace devel (commit unknown, go1.26.8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.v, tt.c, tt.bi); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
