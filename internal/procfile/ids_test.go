package procfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// needRoot skips without root, and fails under CI=true.
func needRootIDs(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root")
		}
		t.Skip("needs root")
	}
}

// TestUntrustedAndIDs: a perf map is read only when it is a regular file, reached without a
// symlink, owned by the process's user or root (as perf reads it).
func TestUntrustedAndIDs(t *testing.T) {
	needRootIDs(t)
	const uid = 65534 // nobody
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	dir, err := os.MkdirTemp("/tmp", "jitopen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	write := func(name string, owner int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("10 4 x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, owner, owner); err != nil {
			t.Fatal(err)
		}
		return p
	}
	own, root, other := write("own", uid), write("root", 0), write("other", 4242)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path      string
		untrusted bool
	}{
		{own, false}, {root, false}, {other, true}, {link, true}, {dir, true},
	}
	for _, tt := range tests {
		f, err := OpenOwned(pid, tt.path, 0)
		if f != nil {
			f.Close()
		}
		if tt.untrusted != errors.Is(err, ErrUntrusted) || (!tt.untrusted && err != nil) {
			t.Errorf("%s: err %v, want untrusted %v", filepath.Base(tt.path), err, tt.untrusted)
		}
	}
	// Create makes a new file, never an existing one, nor through a symlink.
	made, err := Create(pid, filepath.Join(dir, "new"), 0o600)
	if err != nil {
		t.Errorf("Create: %v", err)
	} else {
		made.Close()
	}
	if f, err := Create(pid, own, 0o600); err == nil {
		f.Close()
		t.Error("Create over an existing file: no error")
	}
	if f, err := Create(pid, filepath.Join(dir, "link"), 0o600); !errors.Is(err, ErrUntrusted) && err == nil {
		f.Close()
		t.Error("Create through a symlink: no error")
	}
	ids, err := ReadIDs(pid)
	if err != nil || ids.UID != uid || ids.EUID != uid || ids.NSPID != pid {
		t.Errorf("ReadIDs(%d) = %+v, %v", pid, ids, err)
	}
}
