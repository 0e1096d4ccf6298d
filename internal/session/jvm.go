package session

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/jvmattach"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/tracer"
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

// jvmAttachWait bounds the wait for a JVM's attach listener and reply.
const jvmAttachWait = 10 * time.Second

// jvmPerfMapEvery bounds how often JIT code with no name yet makes
// memtrace ask a JVM for its map again.
const jvmPerfMapEvery = 2 * time.Second

// jvmPerfMapNowWait bounds a request made while an event waits for its
// charge: the JVM's attach listener already runs, and answers in
// milliseconds.
const jvmPerfMapNowWait = time.Second

// jvmPerfMapNow asks JVM target pid for its perf map (--jvm-perfmap)
// when its code met in a stack has no name yet: code compiled since the
// last request. The event is charged by the names in the map, once and
// for good, so when the JVM's attach listener already runs (a request was
// answered) the request is made now and the event waits for it (true:
// the map was read again). Otherwise, the first request starting the
// listener (which may take seconds), it runs in the background and the
// event is charged as it is. At most one request runs per JVM, and at
// most one starts every jvmPerfMapEvery.
func (s *session) jvmPerfMapNow(pid int) bool {
	t := s.targets[pid]
	if !s.cfg.JVMPerfMap || t == nil || !t.jvm || t.exited || t.perfMapBusy.Load() ||
		time.Since(t.perfMapAsked) < jvmPerfMapEvery {
		return false
	}
	t.perfMapAsked = time.Now()
	if t.perfMapReady.Load() {
		return s.requestJVMPerfMap(t, jvmPerfMapNowWait)
	}
	t.perfMapBusy.Store(true)
	go func() {
		defer t.perfMapBusy.Store(false)
		s.requestJVMPerfMap(t, jvmAttachWait)
	}()
	return false
}

// requestJVMPerfMap asks the JVM t to write its perf map, waiting at most
// wait, then reads it; false if it did not answer.
func (s *session) requestJVMPerfMap(t *target, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := jvmattach.Command(ctx, t.pid, "Compiler.perfmap"); err != nil {
		s.log.Warn("JVM perf map", "pid", t.pid, "err", err)
		return false
	}
	t.perfMapReady.Store(true)
	s.res.RereadJIT(t.pid)
	s.log.Info("JVM perf map written", "pid", t.pid)
	return true
}

// requestJVMPerfMaps asks each live JVM target to write its perf map
// (--jvm-perfmap), then reads it: its JIT code is named in the report.
// The first request starts the JVM's Attach Listener thread. It runs at
// each report, when a JVM is attached with -p (its code is compiled by
// then, most often), and when a charged stack meets JIT code the last map
// did not name (jvmPerfMapNow).
func (s *session) requestJVMPerfMaps() {
	if !s.cfg.JVMPerfMap {
		return
	}
	for _, t := range s.targets {
		if !t.jvm || t.exited {
			continue
		}
		s.requestJVMPerfMap(t, jvmAttachWait)
	}
}
