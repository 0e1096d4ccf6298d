package procfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// tree builds a directory: "f" regular, "big" of 100 bytes, "fifo", "link"
// to f, "abs" an absolute link to /f, "sub" a directory and "via" a link
// to it, "up" a link to ../../.. .
func tree(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(d, "f"), []byte("hello"), 0o644))
	must(os.WriteFile(filepath.Join(d, "big"), make([]byte, 100), 0o644))
	must(syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644))
	must(os.Symlink("f", filepath.Join(d, "link")))
	must(os.Symlink("/f", filepath.Join(d, "abs")))
	must(os.Mkdir(filepath.Join(d, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(d, "sub", "g"), []byte("g"), 0o644))
	must(os.Symlink("sub", filepath.Join(d, "via")))
	must(os.Symlink("../../../../../../etc/passwd", filepath.Join(d, "up")))
	return d
}

func TestOpen(t *testing.T) {
	d := tree(t)
	for _, tc := range []struct {
		path    string
		res     Resolution
		max     int64
		want    string // content read, or "" when refused
		wantErr error
	}{
		{"/f", NoSymlinks, 0, "hello", nil},
		{"f", NoSymlinks, 5, "hello", nil},
		{"/big", NoSymlinks, 99, "", ErrTooLarge},
		{"/fifo", NoSymlinks, 0, "", ErrNotRegular},
		{"/fifo", FollowInRoot, 0, "", ErrNotRegular},
		{"/sub", NoSymlinks, 0, "", ErrNotRegular},
		{"/link", NoSymlinks, 0, "", syscall.ELOOP},
		{"/via/g", NoSymlinks, 0, "", syscall.ELOOP},
		{"/link", FollowInRoot, 0, "hello", nil},
		{"/abs", FollowInRoot, 0, "hello", nil}, // "/f" inside the root
		{"/via/g", FollowInRoot, 0, "g", nil},
		{"/../../../../etc/passwd", FollowInRoot, 0, "", os.ErrNotExist}, // ".." stops at the root
		{"/up", FollowInRoot, 0, "", os.ErrNotExist},
		{"/missing", NoSymlinks, 0, "", os.ErrNotExist},
	} {
		t.Run(tc.path, func(t *testing.T) {
			f, err := Open(d, tc.path, tc.res, tc.max)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Open(%q) = %v, want %v", tc.path, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 16)
			n, _ := f.Read(b)
			if string(b[:n]) != tc.want {
				t.Errorf("read %q, want %q", b[:n], tc.want)
			}
		})
	}
}

// TestOpenOwned: a perf map is read only when it is a regular file, reached
// without a symbolic link, and owned by the process's user or root.
func TestOpenOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the owner checks need root (chown, a process of another user)")
		}
		t.Skip("needs root")
	}
	const uid, other = 12345, 23456
	d := t.TempDir()
	os.Chmod(d, 0o755)
	write := func(name string, owner int) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, []byte("7f0000 10 JS:f\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, owner, owner); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine := write("perf-mine.map", uid)
	root := write("perf-root.map", 0)
	theirs := write("perf-theirs.map", other)
	link := filepath.Join(d, "perf-link.map")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}

	// A process running as uid, in our root.
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	if got, err := EffectiveUID(pid); err != nil || got != uid {
		t.Fatalf("EffectiveUID = %d, %v, want %d", got, err, uid)
	}
	for _, tc := range []struct {
		path    string
		wantErr error
	}{
		{mine, nil},
		{root, nil},
		{theirs, ErrNotOwner},
		{link, syscall.ELOOP},
		{d, ErrNotRegular},
	} {
		f, err := OpenOwned(pid, tc.path, 1<<20)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("OpenOwned(%s) = %v, want %v", filepath.Base(tc.path), err, tc.wantErr)
		}
		if err == nil {
			f.Close()
		}
	}
	// Our own process runs as root: a map of another user is not ours.
	if _, err := OpenOwned(os.Getpid(), mine, 0); !errors.Is(err, ErrNotOwner) {
		t.Errorf("OpenOwned(own pid, a file of uid %d) = %v, want ErrNotOwner", uid, err)
	}
}

// TestOpenMapped: map_files opens the file mapped, by address range.
func TestOpenMapped(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	for l := range strings.Lines(string(b)) {
		fields := strings.Fields(l)
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		var start, end uint64
		r := strings.SplitN(fields[0], "-", 2)
		start, end = parseHex(t, r[0]), parseHex(t, r[1])
		f, err := OpenMapped(os.Getpid(), start, end, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		want, _ := os.Stat(exe)
		if !os.SameFile(fi, want) {
			t.Errorf("OpenMapped opened %v, want the test binary", fi)
		}
		if _, err := OpenMapped(os.Getpid(), start, end, 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("OpenMapped with a 1-byte bound = %v, want ErrTooLarge", err)
		}
		return
	}
	t.Fatal("the test binary is not in /proc/self/maps")
}

func parseHex(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPerfMapPath: a process outside any PID namespace of its own writes
// /tmp/perf-PID.map with its pid; one in a new PID namespace, with the
// pid it sees (1, as its namespace's first process).
func TestPerfMapPath(t *testing.T) {
	if p, err := PerfMapPath(os.Getpid()); err != nil || p != "/tmp/perf-"+strconv.Itoa(os.Getpid())+".map" {
		t.Errorf("PerfMapPath(self) = %q, %v", p, err)
	}
	if os.Geteuid() != 0 {
		return
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if p, err := PerfMapPath(cmd.Process.Pid); err != nil || p != "/tmp/perf-1.map" {
		t.Errorf("PerfMapPath(a process in its own PID namespace) = %q, %v, want /tmp/perf-1.map", p, err)
	}
}
