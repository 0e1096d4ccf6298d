// Package procfile opens files on a traced process's behalf: its
// binaries, their debug files, its perf maps. memtrace runs as root and
// the process chooses these paths, may plant symlinks, FIFOs or huge files
// in its own directories, and may live in another mount namespace. So a
// path is resolved inside the process's root (never climbing out of it
// with ".." or an absolute symlink), a mapped file is opened through
// /proc/PID/map_files (the very file mapped, whatever its name now
// holds), only regular files are read, their size is bounded, and a file
// is opened without blocking (a FIFO put where a file was expected cannot
// hang memtrace).
package procfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Errors callers branch on. ErrUntrusted is the parent of every refusal
// that says the process (or another user) planted the file: a symbolic
// link, a file that is not regular, one owned by someone else.
var (
	ErrUntrusted  = errors.New("untrusted file")
	ErrNotRegular = fmt.Errorf("not a regular file: %w", ErrUntrusted)
	ErrTooLarge   = errors.New("file too large")
	ErrNotOwner   = fmt.Errorf("owned by neither the process's user nor root: %w", ErrUntrusted)
)

// Resolution says how a path is resolved inside its root.
type Resolution int

const (
	// NoSymlinks refuses a path with a symbolic link in any component:
	// for files the process writes itself (perf maps), or whose paths the
	// kernel gives canonical (mapped files).
	NoSymlinks Resolution = iota
	// FollowInRoot follows symbolic links, resolved inside the root
	// (RESOLVE_IN_ROOT): for debug files, which distributions install
	// behind links (merged /usr, .build-id), and which are checked against
	// the module's build-id or CRC before use.
	FollowInRoot
)

// OpenInRoot opens path, absolute as process pid names it, inside the
// process's root directory (/proc/PID/root), with no symbolic link
// followed. The file must be regular and at most maxSize bytes (maxSize <=
// 0: no bound).
func OpenInRoot(pid int, path string, maxSize int64) (*os.File, error) {
	return Open(Root(pid), path, NoSymlinks, maxSize)
}

// OpenOwned is OpenInRoot for a file the process wrote itself and that
// memtrace then trusts (a perf map): it must also be owned by the
// process's effective user or by root, as perf requires, so that another
// user cannot plant one for it.
func OpenOwned(pid int, path string, maxSize int64) (*os.File, error) {
	f, err := OpenInRoot(pid, path, maxSize)
	if err != nil {
		return nil, err
	}
	if err := CheckOwner(f, pid); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Root is the path of process pid's root directory.
func Root(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/root" }

// Open opens path inside the directory root ("/" for ours) as res says:
// ".." and absolute symbolic links stay inside root (RESOLVE_IN_ROOT), and
// /proc's magic links are never followed. The file must be regular and at
// most maxSize bytes (maxSize <= 0: no bound).
func Open(root, path string, res Resolution, maxSize int64) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open root", Path: root, Err: err}
	}
	defer unix.Close(dir)
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	if res == NoSymlinks {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	var fd int
	for {
		fd, err = unix.Openat2(dir, strings.TrimLeft(path, "/"), &how)
		if err != unix.EINTR && err != unix.EAGAIN { // EAGAIN: a rename raced the lookup
			break
		}
	}
	if err != nil {
		if err == unix.ELOOP || err == unix.EXDEV {
			err = fmt.Errorf("%w (symbolic link refused): %w", err, ErrUntrusted)
		}
		return nil, &os.PathError{Op: "open", Path: root + "/" + strings.TrimLeft(path, "/"), Err: err}
	}
	return checked(os.NewFile(uintptr(fd), root+"/"+strings.TrimLeft(path, "/")), maxSize)
}

// OpenMapped opens the file process pid maps at [start, end), through
// /proc/PID/map_files: the file mapped, even deleted, renamed, or in
// another mount namespace. The file must be regular and at most maxSize
// bytes (maxSize <= 0: no bound). Reading map_files takes CAP_SYS_ADMIN.
func OpenMapped(pid int, start, end uint64, maxSize int64) (*os.File, error) {
	return OpenFollowed(MapFile(pid, start, end), maxSize)
}

// MapFile is the /proc/PID/map_files path of the mapping at [start, end).
func MapFile(pid int, start, end uint64) string {
	return "/proc/" + strconv.Itoa(pid) + "/map_files/" + strconv.FormatUint(start, 16) + "-" + strconv.FormatUint(end, 16)
}

// OpenFollowed opens a path memtrace chose (not the process), such as a
// map_files link, without blocking, and checks it as Open does.
func OpenFollowed(path string, maxSize int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	return checked(f, maxSize)
}

// checked returns f if it is a regular file of at most maxSize bytes,
// else closes it. O_NONBLOCK stays set, which changes nothing for a
// regular file: its reads never block.
func checked(f *os.File, maxSize int64) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", f.Name(), ErrNotRegular)
	}
	if maxSize > 0 && fi.Size() > maxSize {
		f.Close()
		return nil, fmt.Errorf("open %s: %w: %d bytes, at most %d", f.Name(), ErrTooLarge, fi.Size(), maxSize)
	}
	return f, nil
}

// CheckOwner returns ErrNotOwner unless f is owned by root or by the
// effective user of process pid.
func CheckOwner(f *os.File, pid int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("check owner of %s: no owner", f.Name())
	}
	if st.Uid == 0 {
		return nil
	}
	uid, err := EffectiveUID(pid)
	if err != nil {
		return fmt.Errorf("check owner of %s: %w", f.Name(), err)
	}
	if st.Uid != uid {
		return fmt.Errorf("%s: %w (uid %d, the process runs as %d)", f.Name(), ErrNotOwner, st.Uid, uid)
	}
	return nil
}

// PerfMapPath is where process pid writes its perf map (JIT symbols), as
// the process names it: /tmp/perf-N.map, N its pid in its own PID
// namespace (the last of NSpid in /proc/PID/status). Open it with
// OpenOwned.
func PerfMapPath(pid int) (string, error) {
	f, err := statusField(pid, "NSpid")
	if err != nil {
		return "", fmt.Errorf("perf map of process %d: %w", pid, err)
	}
	ns, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		return "", fmt.Errorf("perf map of process %d: NSpid %q", pid, f)
	}
	return "/tmp/perf-" + strconv.Itoa(ns) + ".map", nil
}

// EffectiveUID reads process pid's effective user id from
// /proc/PID/status ("Uid:\treal\teffective\tsaved\tfs").
func EffectiveUID(pid int) (uint32, error) {
	f, err := statusField(pid, "Uid")
	if err != nil || len(f) < 2 {
		return 0, fmt.Errorf("read uid of process %d: %w", pid, errors.Join(err, errors.New("no effective uid")))
	}
	uid, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("read uid of process %d: %w", pid, err)
	}
	return uint32(uid), nil
}

// statusField returns the values of the line key of /proc/PID/status
// (at least one).
func statusField(pid int, key string) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f, nil
			}
			break
		}
	}
	return nil, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// IDs are a process's user ids and its pid in its own PID namespace.
type IDs struct {
	UID, EUID uint32
	NSPID     int // the last of NSpid: its pid in its innermost namespace
}

// ReadIDs reads process pid's IDs from /proc/PID/status. A process that
// is gone gives an error that is os.ErrNotExist.
func ReadIDs(pid int) (IDs, error) {
	uid, err := statusField(pid, "Uid")
	if err != nil || len(uid) < 2 {
		return IDs{}, fmt.Errorf("read ids of process %d: %w", pid, errors.Join(err, errors.New("no Uid line")))
	}
	u, err1 := strconv.ParseUint(uid[0], 10, 32)
	e, err2 := strconv.ParseUint(uid[1], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return IDs{}, fmt.Errorf("read ids of process %d: %w", pid, err)
	}
	ids := IDs{UID: uint32(u), EUID: uint32(e), NSPID: pid}
	if ns, err := statusField(pid, "NSpid"); err == nil {
		if n, err := strconv.Atoi(ns[len(ns)-1]); err == nil && n > 0 {
			ids.NSPID = n
		}
	}
	return ids, nil
}

// Create creates path, as process pid names it, inside its root with no
// symbolic link followed and O_EXCL: a file memtrace writes on the
// process's behalf (the JVM's attach trigger). An existing file gives an
// error that is os.ErrExist.
func Create(pid int, path string, perm uint32) (*os.File, error) {
	dir, err := unix.Open(Root(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open root", Path: Root(pid), Err: err}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, strings.TrimLeft(path, "/"), &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NOCTTY,
		Mode:    uint64(perm),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: Root(pid) + "/" + strings.TrimLeft(path, "/"), Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
