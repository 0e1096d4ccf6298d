package session

import (
	"errors"
	"time"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/python"
)

// pyState is the session's view of the Python processes it traces: which
// have their frames read, and when the others were last looked at.
type pyState struct {
	stacks *python.Stacks
	// done: found (frames read), or never to be (an unknown version);
	// tried: when a process not found yet was last looked at.
	done  map[uint32]bool
	tried map[uint32]time.Time
	tries map[uint32]int
}

// pyRetry bounds how often a process whose interpreter is not mapped yet
// (a command whose libpython the dynamic linker has yet to load) is
// looked at again; pyTries how many times one is, for its faults (whole
// host: most processes run no Python). A pymalloc call always may.
const (
	pyRetry = 100 * time.Millisecond
	pyTries = 10
)

// pythonEvent finds e's process's interpreter the first time it may run
// Python: a pymalloc call, or a sampled fault (whole host, resident
// memory only). From then on its probes read its Python frames.
func (s *session) pythonEvent(e *event.Event) {
	if s.objs == nil || s.cfg.NoPythonFrames || (!e.Func.Python() && e.Kind != event.Fault) {
		return
	}
	if s.py == nil {
		s.py = &pyState{stacks: python.NewStacks(s.res), done: map[uint32]bool{}, tried: map[uint32]time.Time{},
			tries: map[uint32]int{}}
		s.objs.SetPythonStacks(s.py.stacks)
	}
	if s.py.done[e.PID] || time.Since(s.py.tried[e.PID]) < pyRetry || (!e.Func.Python() && s.py.tries[e.PID] >= pyTries) {
		return
	}
	s.py.tried[e.PID] = time.Now()
	s.py.tries[e.PID]++
	l, err := python.Find(int(e.PID))
	switch {
	case errors.Is(err, python.ErrUnknownVersion):
		s.py.done[e.PID] = true
		s.log.Warn("python frames not read: native frames only", "pid", e.PID, "err", err)
		return
	case err != nil:
		return // not (yet) an interpreter
	}
	s.py.done[e.PID] = true
	keepTags := s.freesCode(e.PID, l.Path)
	if err := s.py.stacks.Add(e.PID, l, keepTags); err != nil {
		s.log.Warn("python frames not read", "pid", e.PID, "err", err)
		return
	}
	if err := s.objs.TracePython(e.PID, l, keepTags); err != nil {
		s.log.Warn("python frames not read", "pid", e.PID, "err", err)
		return
	}
	s.log.Info("python frames", "pid", e.PID, "version", l.Version(), "interpreter", l.Module)
}

// forgetPython drops pid's Python state (exited, or a new program).
func (s *session) forgetPython(pid uint32) {
	if s.py == nil {
		return
	}
	delete(s.py.done, pid)
	delete(s.py.tried, pid)
	delete(s.py.tries, pid)
	s.objs.UntracePython(pid)
	if n := s.py.stacks.Forget(pid); n > 0 {
		// Charged to their next named frame, or to C. Most short-lived
		// Python processes on a host have a few: the reader polls every
		// 20 ms, so -v says it, not a warning.
		s.log.Info("python lines not named", "pid", pid, "events", n,
			"why", "their code objects could not be read: the process had exited before memtrace read its events (docs/python.md)")
	}
}

// freesCode reports whether the probes placed for pid include its
// interpreter's code_dealloc (at path): then its code objects' tags may be
// kept until they are freed (bpf/python.h). The whole host's resident
// mode places no such probe.
func (s *session) freesCode(pid uint32, path string) bool {
	if s.host != nil {
		return s.host.att.FreesCode(path)
	}
	t := s.targets[int(pid)]
	return t != nil && t.att != nil && t.att.FreesCode(path)
}
