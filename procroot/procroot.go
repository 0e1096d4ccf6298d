// Package procroot opens files that a traced process controls (its perf
// map, the JVM's attach files) inside the process's own root directory,
// without following symlinks, and checks who owns them: everything there
// is untrusted. Issue 37 brings a shared opener of untrusted files; this
// one is folded into it at merge.
package procroot

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUntrusted is returned for a file a traced process could have planted
// to mislead: a symlink on the way, not a regular file, or owned by neither
// the process's user nor root.
var ErrUntrusted = errors.New("untrusted file")

// Open opens path (absolute, as process pid sees it) for
// reading inside the process's root directory, as perf opens a perf map:
// the walk cannot leave that root (RESOLVE_IN_ROOT) and follows no
// symlink (RESOLVE_NO_SYMLINKS), and the file must be a regular file owned
// by the process's real or effective user, or by root. A FIFO cannot make
// the open block (O_NONBLOCK).
func Open(pid int, path string) (*os.File, error) {
	f, err := openat2(pid, path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s of process %d: %w", path, pid, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("%s of process %d: not a regular file: %w", path, pid, ErrUntrusted)
	}
	ids, err := ReadIDs(pid)
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Uid != 0 && st.Uid != ids.UID && st.Uid != ids.EUID {
		f.Close()
		return nil, fmt.Errorf("%s of process %d: owned by uid %d, the process runs as %d: %w", path, pid, st.Uid, ids.EUID, ErrUntrusted)
	}
	return f, nil
}

// Create makes a new file at path inside process pid's root directory
// (O_EXCL: never an existing file, nor through a symlink), with mode
// perm, owned by memtrace's user (root).
func Create(pid int, path string, perm uint32) (*os.File, error) {
	return openat2(pid, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, perm)
}

// openat2 opens path under /proc/PID/root: the walk cannot leave that
// root and follows no symlink.
func openat2(pid int, path string, flags int, perm uint32) (*os.File, error) {
	root, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, goneOr(fmt.Errorf("open root of process %d: %w", pid, err))
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, strings.TrimLeft(path, "/"), &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NOCTTY),
		Mode:    uint64(perm),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("open %s of process %d: a symlink: %w", path, pid, ErrUntrusted)
		}
		return nil, fmt.Errorf("open %s of process %d: %w", path, pid, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// goneOr makes "no such process" match os.ErrNotExist as ENOENT does.
func goneOr(err error) error {
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: %w", os.ErrNotExist, err)
	}
	return err
}

// IDs are what /proc/PID/status says of a process's identity.
type IDs struct {
	UID, EUID uint32
	NSPID     int // its pid in its own (innermost) pid namespace
}

// ReadIDs reads the Uid and NSpid lines of /proc/PID/status.
func ReadIDs(pid int) (IDs, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return IDs{}, goneOr(fmt.Errorf("read status of process %d: %w", pid, err))
	}
	defer f.Close()
	ids := IDs{NSPID: pid}
	haveUid := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(val)
		switch key {
		case "Uid":
			if len(fs) < 2 {
				break
			}
			u, err1 := strconv.ParseUint(fs[0], 10, 32)
			e, err2 := strconv.ParseUint(fs[1], 10, 32)
			if err1 == nil && err2 == nil {
				ids.UID, ids.EUID, haveUid = uint32(u), uint32(e), true
			}
		case "NSpid":
			if len(fs) > 0 {
				if n, err := strconv.Atoi(fs[len(fs)-1]); err == nil && n > 0 {
					ids.NSPID = n
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return IDs{}, goneOr(fmt.Errorf("read status of process %d: %w", pid, err))
	}
	if !haveUid {
		return IDs{}, fmt.Errorf("status of process %d: no Uid line", pid)
	}
	return ids, nil
}
