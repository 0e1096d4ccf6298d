package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// InstallPackages are the Debian/Ubuntu packages of the optional rows.
var InstallPackages = []string{"heaptrack", "valgrind", "sqlite3", "redis-server", "redis-tools"}

// Install apt-get installs the comparison tools (a fresh machine has only
// Go and gcc). Output goes to log.
func Install(ctx context.Context, log io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("--install runs apt-get: it needs root")
	}
	if tool("apt-get") == "" {
		return fmt.Errorf("--install needs apt-get; install %v by hand", InstallPackages)
	}
	steps := [][]string{
		{"apt-get", "update"},
		append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, InstallPackages...),
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%v: %w", s, err)
		}
	}
	return nil
}
