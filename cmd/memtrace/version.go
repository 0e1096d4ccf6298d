package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit name the build. `make build` sets them with -ldflags
// -X (git describe and git rev-parse): the environment may build with
// -buildvcs=false, which leaves the build information no revision. A plain
// `go build` or `go install` leaves them empty, and buildVersion reads what
// the Go toolchain recorded.
var (
	version string
	commit  string
)

// buildVersion is the version line: `memtrace version` and --version.
func buildVersion() string {
	return versionLine(version, commit, readBuildInfo())
}

func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// versionLine prefers what -ldflags set, then the build information: the
// module's version (`go install …@v1.2.3`) and the VCS revision (with
// "-dirty" when the tree had changes).
func versionLine(v, c string, bi *debug.BuildInfo) string {
	goVersion := runtime.Version()
	if bi != nil {
		goVersion = bi.GoVersion
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		if c == "" {
			modified := false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					c = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if c != "" && modified {
				c += "-dirty"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("memtrace %s (commit %s, %s)", v, c, goVersion)
}

// versionCommand is `memtrace version`.
func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print memtrace's version and the commit it was built from",
		Args:  exactArgs(0, "memtrace version takes no arguments (to trace a command named version: memtrace -- version)"),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, buildVersion())
			return err
		},
	}
}
