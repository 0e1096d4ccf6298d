package symbolize

import (
	"os"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/procfile"
	"github.com/memtrace/memtrace/internal/procfs"
)

// readProcMaps reads /proc/PID/maps (procfs.ReadMaps: a process gone
// matches os.ErrNotExist).
func readProcMaps(pid int) ([]procfs.Mapping, error) { return procfs.ReadMaps(pid) }

// moduleCandidates lists where the file of mapping m of process pid can be
// opened, best first, and the inode each must have (0: no check needed).
// map_files names the mapped file itself, even when deleted or in another
// mount namespace; the root link reaches it by name in the process's mount
// namespace; the bare path works for processes sharing ours.
func moduleCandidates(pid int, m procfs.Mapping) []candidate {
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
