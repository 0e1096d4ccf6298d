package session

import (
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// execve's own writes (the new program's arguments and environment,
// charged to symbolize.ExecveSite) fault before the exec they belong to
// is known here: in the ring before the whole host's exec event, and
// before a command's exec stop. That exec restarts the process's
// statistics, which would drop them with the old program's. So they are
// held, never applied, until the exec has restarted the statistics
// (releaseExecve), and dropped if the process exits first.

// maxExecveHeld bounds what one process holds: execve writes at most
// ARG_MAX's pointers, a few hundred pages, each sampled at most once.
const maxExecveHeld = 4096

// holdExecve holds e when it is an execve write of a process whose next
// exec will be met: every process of the whole host, a command and the
// processes it forks (-f). A -p target's exec is not, so its are applied.
func (s *session) holdExecve(e *event.Event) bool {
	if e.Kind != event.Fault || e.CallSite != symbolize.ExecveSite {
		return false
	}
	if s.host == nil {
		if t := s.targets[int(e.PID)]; t == nil || !t.stopsAtExec || t.exited {
			return false
		}
	}
	if s.execveHeld == nil {
		s.execveHeld = map[uint32][]event.Event{}
	}
	if held := s.execveHeld[e.PID]; len(held) < maxExecveHeld {
		c := *e
		// The drainer reuses its frames. The stack, if the exec made the
		// tracer forget it, is the one frame the report makes of the
		// site (pipeline.StackSource).
		c.Stack = nil
		s.execveHeld[e.PID] = append(held, c)
	}
	return true
}

// releaseExecve applies pid's held execve writes, once its exec has
// restarted its statistics (or, a command's first, found none to
// restart).
func (s *session) releaseExecve(pid uint32) {
	held := s.execveHeld[pid]
	delete(s.execveHeld, pid)
	for i := range held {
		s.applyEvent(&held[i])
	}
}

// dropExecve forgets pid's held writes: it exited before its exec was met.
func (s *session) dropExecve(pid uint32) { delete(s.execveHeld, pid) }
