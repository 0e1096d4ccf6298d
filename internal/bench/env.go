package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ModuleRoot finds the directory holding memtrace's go.mod, from the working
// directory up: `go run ./bench/cmd/membench` runs from the root, `go test`
// from bench/.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/memtrace/memtrace\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod of github.com/memtrace/memtrace above the working directory")
		}
		dir = parent
	}
}

// bpfUnavailable says why this process cannot load and attach BPF programs,
// or "" when it can.
func bpfUnavailable() string {
	switch {
	case runtime.GOOS != "linux" || runtime.GOARCH != "amd64":
		return "memtrace's probes are built for linux/amd64"
	case os.Geteuid() != 0:
		return "tracing needs root"
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return "the kernel has no BTF"
	}
	return ""
}

// buildMemtrace builds cmd/memtrace into dir.
func buildMemtrace(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "memtrace")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/memtrace")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build memtrace: %w\n%s", err, b)
	}
	return out, nil
}

// compileC builds testdata/bench/NAME.c into dir with gcc.
func compileC(ctx context.Context, root, dir, name string, flags ...string) (string, error) {
	out := filepath.Join(dir, name)
	args := append([]string{"-O2", "-Wall", "-o", out, filepath.Join(root, "testdata", "bench", name+".c")}, flags...)
	cmd := exec.CommandContext(ctx, "gcc", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// notInstalled says that name is missing and how to get it, or "" when
// it is installed.
func notInstalled(name string) string {
	if tool(name) == "" {
		return name + " not installed (membench --install)"
	}
	return ""
}

// tool returns the path of an installed program, or "" when it is missing.
func tool(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// hostInfo describes the machine, for the JSON: load averages say how
// noisy the run was.
func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	h.LoadStart = loadAvg()
	return h
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
