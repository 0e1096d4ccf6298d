package session

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// consumerNice is memtrace's scheduling priority while it traces. The traced
// threads spend their time in the kernel's probe handlers; on a small
// machine they would otherwise starve the one reader that drains the ring
// buffer, and events would be lost.
const consumerNice = -10

// raisePriority gives every memtrace thread consumerNice (Linux keeps nice
// per thread; threads created later inherit it). Call it after a command
// has been started, so that the command keeps its own priority.
func raisePriority() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, consumerNice)
		}
	}
}
