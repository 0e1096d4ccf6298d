package tracer

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"github.com/cilium/ebpf/link"
)

// The kernel tears a uprobe perf event down under a global mutex
// (event_mutex) and waits for an RCU grace period before it lets go: on
// Debian 12's 6.1, libc's ~45 per-probe links took 3 s to close, however
// many threads closed them. Closing a link's BPF side is quick, though, and
// stops the programs at once. So Detach keeps a duplicate of each perf
// event, closes the links (the programs are gone, the probes stay armed
// but empty), and hands the duplicates to a child process that exits at
// once: its exit closes them, one grace period each, while memtrace and
// the traced process go on. A process still traced meanwhile only takes
// the bare trap on those functions, with no program behind it.

// reapEnv, set in memtrace's environment, makes it the reaper.
const reapEnv = "MEMTRACE_REAP_PERF_EVENTS"

func init() {
	if os.Getenv(reapEnv) == "1" {
		// Exiting closes the inherited perf events.
		os.Exit(0)
	}
}

// holdPerfEvents duplicates the perf event of each per-probe link.
func holdPerfEvents(groups ...[]link.Link) []*os.File {
	var held []*os.File
	for _, links := range groups {
		for _, l := range links {
			pe, ok := l.(link.PerfEvent)
			if !ok {
				continue
			}
			if f, err := pe.PerfEvent(); err == nil {
				held = append(held, f)
			}
		}
	}
	return held
}

// reap hands the perf events to a reaper and closes memtrace's copies
// (quick: they are no longer the last). Without a reaper it closes them
// itself, slowly.
func reap(held []*os.File) error {
	if len(held) == 0 {
		return nil
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{reapEnv + "=1"}
	cmd.ExtraFiles = held
	// Its own session: a Ctrl-C on the terminal is not for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := cmd.Start()
	if err == nil {
		go cmd.Wait()
	}
	errs := make([]error, len(held))
	for i, f := range held {
		errs[i] = f.Close()
	}
	return errors.Join(errs...)
}
