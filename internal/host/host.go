// Package host finds the allocators in use on the whole host: for each
// process, the files its allocator functions bind to (as package allocator
// decides them per process), de-duplicated by device and inode so that
// one set of system-wide probes covers every process that maps a file —
// the host's libc once, each container's own libc once (reached through
// /proc/PID/root), jemalloc and the like once each.
package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/tracer"
)

// Filter narrows the processes traced (--comm, --cgroup). The BPF
// programs apply the same filter to every call; user space applies it to
// choose whose allocators to find.
type Filter struct {
	// Comm is the process's command name (its main thread's comm), cut
	// to 15 bytes as the kernel cuts it; "" = any.
	Comm string
	// Cgroup is a cgroup v2 path as /proc/PID/cgroup shows it ("/a/b");
	// processes in it or below it pass. "" = any.
	Cgroup string
}

// Match reports whether process pid passes the filter (false once it is gone).
func (f Filter) Match(pid int) bool {
	if f.Comm != "" && Comm(pid) != f.Comm {
		return false
	}
	if f.Cgroup != "" {
		cg, ok := cgroupOf(pid)
		if !ok || !under(cg, f.Cgroup) {
			return false
		}
	}
	return true
}

func under(path, root string) bool {
	return root == "/" || path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}

// CommName cuts name as the kernel cuts a comm.
func CommName(name string) string {
	if len(name) > tracer.CommLen-1 {
		return name[:tracer.CommLen-1]
	}
	return name
}

// Comm returns the command name of pid, "" if it is gone.
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// cgroupOf returns pid's cgroup v2 path.
func cgroupOf(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// ResolveCgroup takes --cgroup's argument, a cgroup v2 directory
// (/sys/fs/cgroup/unified/a/b) or a path as /proc/PID/cgroup shows it
// (/a/b), and returns the directory (for the BPF filter) and the path
// (for /proc/PID/cgroup).
func ResolveCgroup(arg string) (dir, path string, err error) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", "", err
	}
	arg = filepath.Clean(arg)
	switch {
	case arg == mnt:
		dir, path = mnt, "/"
	case strings.HasPrefix(arg, mnt+"/"):
		dir, path = arg, strings.TrimPrefix(arg, mnt)
	case strings.HasPrefix(arg, "/"):
		dir, path = filepath.Join(mnt, arg), arg
	default:
		return "", "", fmt.Errorf("cgroup %q: give an absolute path (a directory under %s, or a path as /proc/PID/cgroup shows it)", arg, mnt)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("cgroup %s: no such cgroup v2 directory", dir)
	}
	return dir, path, nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("find cgroup v2: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superopts
		f := strings.Fields(sc.Text())
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 {
				return f[4], nil
			}
		}
	}
	return "", errors.New("cgroup v2 is not mounted: --cgroup needs it")
}

// PIDs lists the processes on the host, kernel threads included.
func PIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// ErrKernelThread refuses a kernel thread as a target (-p 2).
var ErrKernelThread = errors.New("is a kernel thread: it has no user memory to trace")

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags (include/linux/sched.h).
const pfKthread = 0x00200000

// KernelThread reports whether pid is a kernel thread: it has no user
// memory, no executable and no allocator, so there is nothing to trace.
func KernelThread(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags: flags is the
	// 7th field after the last ')' (comm may hold spaces and parentheses).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 32)
	return err == nil && flags&pfKthread != 0
}

// Alive reports whether pid exists (a zombie counts as gone: it allocates
// no more).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}
