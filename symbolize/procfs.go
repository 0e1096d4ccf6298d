package symbolize

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/procfile"
)

// readProcMaps reads and parses /proc/PID/maps. A process that is gone,
// or a zombie whose address space is already released, gives an error
// that matches os.ErrNotExist.
func readProcMaps(pid int) ([]Mapping, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, goneOr(err)
	}
	defer f.Close()
	maps, err := ParseMaps(f)
	if err != nil {
		return nil, goneOr(err)
	}
	if len(maps) == 0 {
		return nil, fmt.Errorf("no mappings: %w", os.ErrNotExist)
	}
	return maps, nil
}

// ReadMaps is /proc/PID/maps, parsed.
func ReadMaps(pid int) ([]Mapping, error) { return readProcMaps(pid) }

// goneOr makes "no such process" (ESRCH, returned when the process exits
// while its maps are read) match os.ErrNotExist like ENOENT does.
func goneOr(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: %w", os.ErrNotExist, err)
	}
	return err
}

// moduleCandidates lists where the file of mapping m of process pid can be
// opened, best first, and the inode each must have (0: no check needed).
// map_files names the mapped file itself, even when deleted or in another
// mount namespace; the root link reaches it by name in the process's mount
// namespace; the bare path works for processes sharing ours.
func moduleCandidates(pid int, m Mapping) []candidate {
	proc := "/proc/" + strconv.Itoa(pid)
	return []candidate{
		{path: proc + "/map_files/" + strconv.FormatUint(m.Start, 16) + "-" + strconv.FormatUint(m.End, 16)},
		{path: proc + "/root" + m.Path, wantIno: m.Inode},
		{path: m.Path, wantIno: m.Inode},
	}
}

// maxModuleBytes bounds the binaries and debug files opened: far above
// any real one (node's binary is 98 MB, big debug files a few GB), it
// refuses a file that only claims to be a module.
const maxModuleBytes = 16 << 30

// openModuleFile opens a module's file by one of the paths
// moduleCandidates and AddLibrary make: under /proc/PID/root it is
// resolved inside that root with no symbolic link followed (the kernel
// names mapped files by canonical paths, and the process owns the
// directories on the way); a map_files link is the kernel's own; any
// other path is in our root, where an exec'ed path may well be a link
// (/usr/bin/python3), so links are followed and the callers check the
// inode they expect. Only a regular file of at most maxModuleBytes is
// opened, without blocking.
func openModuleFile(path string) (*os.File, error) {
	if rest, ok := strings.CutPrefix(path, "/proc/"); ok {
		pid, tail, _ := strings.Cut(rest, "/")
		if inRoot, ok := strings.CutPrefix(tail, "root/"); ok {
			return procfile.Open("/proc/"+pid+"/root", inRoot, procfile.NoSymlinks, maxModuleBytes)
		}
		if strings.HasPrefix(tail, "map_files/") {
			return procfile.OpenFollowed(path, maxModuleBytes)
		}
	}
	return procfile.Open("/", path, procfile.FollowInRoot, maxModuleBytes)
}

type candidate struct {
	path    string
	wantIno uint64
}

// processRoots lists the prefixes under which paths of process pid are
// looked up, best first: its root directory (/proc/PID/root, which differs
// from ours in another mount namespace or a chroot), then ours.
func processRoots(pid int) []string {
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	theirs, err := os.Stat(root)
	if err != nil {
		return []string{""}
	}
	if ours, err := os.Stat("/"); err == nil && os.SameFile(theirs, ours) {
		return []string{""}
	}
	return []string{root, ""}
}
