package symbolize

import (
	"os"
	"strconv"

	"github.com/memtrace/memtrace/procfs"
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
