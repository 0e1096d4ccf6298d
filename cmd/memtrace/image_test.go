package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImage builds the container image (Containerfile: the static binary
// FROM scratch) with Debian's buildah, as `make image` does, and runs its
// entrypoint: the whole host's default for 2 seconds, from inside a
// container that has no libc at all.
func TestImage(t *testing.T) {
	needBPF(t)
	if _, err := exec.LookPath("buildah"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but buildah is missing (apt-get install -y buildah)")
		}
		t.Skip("buildah not installed")
	}
	ctx := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ctx, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, memtrace(t), filepath.Join(ctx, "bin", "memtrace"))
	const image = "localhost/memtrace-test:latest"
	buildah := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("buildah", append([]string{"--storage-driver", "vfs"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	buildah("bud", "--isolation", "chroot", "-f", filepath.Join("..", "..", "Containerfile"), "-t", image, ctx)
	defer exec.Command("buildah", "--storage-driver", "vfs", "rmi", "-f", image).Run()
	ctr := strings.TrimSpace(buildah("from", image))
	defer exec.Command("buildah", "--storage-driver", "vfs", "rm", ctr).Run()
	// The capabilities a privileged DaemonSet pod has that memtrace uses.
	out := buildah("run", "--isolation", "chroot", "--cap-add", "CAP_BPF,CAP_PERFMON,CAP_SYS_ADMIN,CAP_SYS_PTRACE,CAP_DAC_READ_SEARCH",
		ctr, "--", "/memtrace", "-d", "2s", "--json")
	if !strings.Contains(out, `"type":"report"`) || !strings.Contains(out, `"final":true`) {
		t.Errorf("no final report from the image's entrypoint:\n%s", out)
	}
}
