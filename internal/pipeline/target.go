package pipeline

import (
	"strconv"
	"strings"
)

// Mode names what a run traces as a recording keeps it (recording.Info's
// Mode): "pid" (-p), "command" (--) or "host" (no target).
func Mode(pids []int, command []string) string {
	switch {
	case len(pids) > 0:
		return "pid"
	case len(command) > 0:
		return "command"
	}
	return "host"
}

// Title names a run in its --html page: the command, or the PIDs, or the
// host.
func Title(pids []int, command []string) string {
	t := []string{"(whole host)"}
	switch {
	case len(command) > 0:
		t = command
	case len(pids) > 0:
		t = nil
		for _, p := range pids {
			t = append(t, "-p "+strconv.Itoa(p))
		}
	}
	return "memtrace " + strings.Join(t, " ")
}
