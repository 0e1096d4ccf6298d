package session

import (
	"fmt"
	"path"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/pipeline"
	"github.com/memtrace/memtrace/tracer"
)

// jvmProbes are the JVM category probes of the first libjvm.so in mods
// (os::malloc and os::realloc, entry only); the table learns the
// categories' names, read from that library. A libjvm.so without its
// symbol table gives none, with a warning: the JVM is traced all the same.
func (s *session) jvmProbes(pid int, mods []allocator.Module) []allocator.Probe {
	for _, m := range mods {
		if !allocator.IsJVM(m) {
			continue
		}
		probes, names, err := allocator.JVMProbes(m)
		if err != nil {
			s.log.Warn("JVM categories unavailable", "pid", pid, "err", err)
			return nil
		}
		s.feed(pipeline.Input{Kind: pipeline.InJVMCategories, PID: uint32(pid), Names: names})
		return probes
	}
	return nil
}

// jvmLoaded places the category probes when a target dlopen'ed a
// libjvm.so memtrace did not probe at attach or exec (a launcher other
// than a JDK's bin/java). What the JVM allocates before they are in (the
// reader's next poll, a few milliseconds) has no category.
func (s *session) jvmLoaded(e *event.Event) {
	t := s.targets[int(e.PID)]
	// The path is the process's own (dlopen's): cleaned, a ".." cannot
	// climb out of its root.
	m := allocator.Module{Path: fmt.Sprintf("/proc/%d/root%s", e.PID, path.Clean("/"+e.Path)), Module: e.Path}
	if t == nil || t.jvm || t.exited || !allocator.IsJVM(m) {
		return
	}
	probes := s.jvmProbes(t.pid, []allocator.Module{m})
	if len(probes) == 0 {
		return
	}
	if err := s.objs.Attach(t.att, tracer.Place(probes)); err != nil {
		s.log.Warn("JVM category probes", "pid", t.pid, "module", e.Path, "err", err)
		return
	}
	t.jvm = true
	s.log.Info("JVM category probes", "pid", t.pid, "module", e.Path, "probes", len(probes))
}
