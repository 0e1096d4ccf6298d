package symbolize

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
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
