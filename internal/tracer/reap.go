package tracer

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The kernel tears down a per-probe link (a uprobe perf event and the BPF
// link on it) under global mutexes (bpf_event_mutex, event_mutex) and
// waits for RCU grace periods before it lets go: on Debian 12's 6.1,
// libc's ~45 links took 2.4-3 s to close, however many threads closed
// them. When the traced process is gone, or memtrace is about to exit,
// nobody needs to wait for that: Release hands the links to a child
// process that exits at once, and its exit closes them while memtrace
// goes on.

// reapEnv, set in memtrace's environment, makes it the reaper.
const reapEnv = "MEMTRACE_REAP_LINKS"

func init() {
	if os.Getenv(reapEnv) == "1" {
		// Until memtrace has closed its own descriptors of the links
		// (stdin's end of file): then this exit holds the last ones.
		io.Copy(io.Discard, os.Stdin)
		// Exiting closes the inherited links, lowest descriptor first:
		// entry probes before return probes, as Detach does.
		os.Exit(0)
	}
}

// Release removes pid's probes for good: Detach, except that the links
// are handed to a reaper process (a uprobe_multi link's teardown waits
// too: node's 13 took 60-170 ms). Use it when the process has
// exited or memtrace is done with it. A process still running keeps its
// probes, and the programs on them, until the reaper is done (0.1 s per
// link at most; their events go nowhere).
func (a *Attachment) Release() error {
	held, err := holdLinks(a.entries, a.returns)
	var closed *os.File
	if err == nil && len(held) > 0 {
		closed, _, err = reap(held)
	}
	for _, f := range held {
		f.Close()
	}
	// The links are no longer the last references: closing is quick.
	err = errors.Join(err, a.Detach())
	if closed != nil {
		closed.Close() // the reaper may go now
	}
	return err
}

// holdLinks duplicates each link's BPF link and, for a per-probe link,
// its perf event, in order.
func holdLinks(groups ...[]link.Link) ([]*os.File, error) {
	var held []*os.File
	for _, links := range groups {
		for _, l := range links {
			raw, hasFD := l.(interface{ FD() int })
			if !hasFD {
				continue
			}
			fd, err := unix.FcntlInt(uintptr(raw.FD()), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return held, err
			}
			held = append(held, os.NewFile(uintptr(fd), "bpf-link"))
			// A uprobe_multi link has no perf event: its link is all.
			pe, ok := l.(link.PerfEvent)
			if !ok {
				continue
			}
			f, err := pe.PerfEvent()
			if err != nil {
				return held, err
			}
			held = append(held, f)
		}
	}
	return held, nil
}

// reap starts the reaper (its PID returned) with the files; it holds them
// from then on, and exits once the file returned is closed. Had it exited first (it starts
// in a few milliseconds), memtrace's own closes were the last, and it
// waited for the teardown after all: node's exit stop, 60 to 85 ms.
func reap(held []*os.File) (*os.File, int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{reapEnv + "=1"}
	cmd.Stdin = r
	cmd.ExtraFiles = held
	// Its own session: a Ctrl-C on the terminal is not for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, 0, err
	}
	reapers.Add(1)
	go func() {
		defer reapers.Done()
		cmd.Wait()
	}()
	return w, cmd.Process.Pid, nil
}

// reapers counts the reapers not yet done (BenchmarkAttach waits for
// them: their teardown would slow the next attach).
var reapers sync.WaitGroup
