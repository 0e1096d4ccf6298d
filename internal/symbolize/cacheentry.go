package symbolize

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Entry directories: memtrace writes the debuginfod cache as root,
// and that cache may be a user's (run with the user's HOME or
// DEBUGINFOD_CACHE_PATH). A user owning it could put a symbolic link where
// memtrace creates, renames or removes files, and have root write or
// delete elsewhere. So an entry (CACHE/ID) is opened once without
// following links, and every file in it is created (O_EXCL, O_NOFOLLOW),
// renamed, removed and chowned through that descriptor.

// entryDir is one opened entry directory of the cache.
type entryDir struct {
	fd   int
	path string // for messages
}

// openEntry opens cache/id, creating it (mode 0700, as elfutils) if create
// is set, and chowns what it creates to uid:gid when they are not ours.
// id must already be checked as hex: it is a path component.
func openEntry(cache, id string, create bool, uid, gid int) (*entryDir, error) {
	base, err := unix.Open(cache, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: cache, Err: err}
	}
	defer unix.Close(base)
	if create {
		if err := unix.Mkdirat(base, id, 0o700); err == nil {
			chownAt(base, id, uid, gid)
		} else if err != unix.EEXIST {
			return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(cache, id), Err: err}
		}
	}
	fd, err := unix.Openat2(base, id, &unix.OpenHow{
		Flags:   unix.O_DIRECTORY | unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(cache, id), Err: err}
	}
	return &entryDir{fd: fd, path: filepath.Join(cache, id)}, nil
}

func (e *entryDir) Close() { unix.Close(e.fd) }

// create makes a new file name in the entry: it must not exist, even as
// a dangling link.
func (e *entryDir) create(name string, perm uint32) (*os.File, error) {
	fd, err := unix.Openat(e.fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: filepath.Join(e.path, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(e.path, name)), nil
}

// createTemp makes a new file named prefix plus random letters.
func (e *entryDir) createTemp(prefix string) (*os.File, string, error) {
	for range 16 {
		var r [8]byte
		rand.Read(r[:])
		name := prefix + hex.EncodeToString(r[:])
		f, err := e.create(name, 0o600)
		if err == nil {
			return f, name, nil
		}
		if !os.IsExist(err) {
			return nil, "", err
		}
	}
	return nil, "", &os.PathError{Op: "create", Path: filepath.Join(e.path, prefix+"*"), Err: unix.EEXIST}
}

func (e *entryDir) rename(from, to string) error {
	if err := unix.Renameat(e.fd, from, e.fd, to); err != nil {
		return &os.PathError{Op: "rename", Path: filepath.Join(e.path, from), Err: err}
	}
	return nil
}

// remove removes name, a file or a link (never what a link points to).
func (e *entryDir) remove(name string) { unix.Unlinkat(e.fd, name, 0) }

// own chowns name, not following a link, to uid:gid when they are not ours.
func (e *entryDir) own(name string, uid, gid int) { chownAt(e.fd, name, uid, gid) }

func chownAt(dir int, name string, uid, gid int) {
	if uid >= 0 && uid != os.Geteuid() {
		unix.Fchownat(dir, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
}
