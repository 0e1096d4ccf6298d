package session

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/launch"
)

// A command is started while the probes load (run): its fork and exec,
// and the reading of the allocator symbols of the program it execs (tens
// of milliseconds for a big program: node's .symtab), pass beside the
// verifier instead of after it. It still runs no instruction of that
// program before its probes are attached: it waits at its exec stop,
// which only the loop resumes, after attach (onStop), as when it was
// started once the probes were in. If the run fails before the loop takes
// it, it is killed at that stop (abandon).

// earlyCommand is a command started before the probes are loaded.
type earlyCommand struct {
	child   *launch.Child
	err     error
	started chan struct{} // closed once launch.Start has returned
	joined  chan struct{} // closed by join: the loop takes the stops
	dropped chan struct{} // closed by abandon: the command is killed
	stops   chan launch.Stop
	wake    func() // set before joined is closed
}

// startEarly starts the command (launch.Start); its first stop, its
// exec, is passed on to the loop once the loop takes it (join) and the
// allocator symbols its program binds to are read (warmAllocator).
func (s *session) startEarly() *earlyCommand {
	c := &earlyCommand{started: make(chan struct{}), joined: make(chan struct{}),
		dropped: make(chan struct{}), stops: make(chan launch.Stop)}
	spec := launch.Spec{Args: s.cfg.Command, Env: os.Environ(),
		Stdin: s.stdin, Stdout: s.stdout, Stderr: s.stderr, Follow: s.cfg.Follow}
	allocatorFile := s.cfg.Allocator
	go func() {
		c.child, c.err = launch.Start(spec)
		close(c.started)
		if c.err == nil {
			c.pass(func(st launch.Stop) {
				if st.Kind == launch.Exec {
					warmAllocator(st.PID, allocatorFile)
				}
			})
		}
	}()
	return c
}

// pass hands the command's stops to the loop, waking its ring's poll for
// each (the loop would see a stop only once its poll's wait is over: up
// to pollWait). The first stop is held until prepare has run on it and
// the loop has taken the command; a command abandoned before is killed
// before its stop is resumed.
func (c *earlyCommand) pass(prepare func(launch.Stop)) {
	in := c.child.Stops
	first, ok := <-in
	if ok {
		prepare(first)
	}
	select {
	case <-c.joined:
	case <-c.dropped:
		// SIGKILL first: a process killed in a ptrace stop never returns
		// to user code, so resuming it runs nothing.
		syscall.Kill(c.child.PID, syscall.SIGKILL)
		if ok {
			first.Resume()
		}
		for st := range in {
			st.Resume()
		}
		return
	}
	defer close(c.stops)
	if !ok {
		return
	}
	c.wake()
	c.stops <- first
	for st := range in {
		c.wake()
		c.stops <- st
	}
}

// join waits until the command has started and gives it to the loop:
// its stops come through pass, each waking the ring's poll (wake).
func (c *earlyCommand) join(wake func()) (*launch.Child, error) {
	<-c.started
	if c.err != nil {
		return nil, c.err
	}
	c.wake = wake
	close(c.joined)
	return &launch.Child{PID: c.child.PID, Stops: c.stops, Done: c.child.Done}, nil
}

// abandon kills a command the loop never took (the run failed first); it
// does nothing once join has run. The kill is sent before it returns:
// memtrace may exit right after, before pass's goroutine runs, and a
// tracee whose tracer exits goes on untraced (no PTRACE_O_EXITKILL: a
// memtrace that dies must not take its command with it). SIGKILL ends a
// process in a ptrace stop without its running another instruction.
func (c *earlyCommand) abandon() {
	if c == nil {
		return
	}
	select {
	case <-c.joined:
		return
	case <-c.dropped:
		return
	default:
		close(c.dropped)
	}
	<-c.started
	if c.err == nil {
		_ = syscall.Kill(c.child.PID, syscall.SIGKILL)
	}
}

// waker is a ring whose poll can be cut short (tracer.Drainer.Wake).
type waker interface{ Wake() }

// wakeRing is the ring's Wake, or nothing for a ring without one.
func (s *session) wakeRing() func() {
	if w, ok := s.drain.(waker); ok {
		return w.Wake
	}
	return func() {}
}

// execModules are the modules the program exe will load, with the
// environment env (/proc/PID/environ), as its exec stop binds them.
func execModules(exe string, env []byte) ([]allocator.Module, error) {
	mods, err := allocator.ForCommand(exe, strings.Split(string(env), "\x00"))
	if err != nil {
		return nil, err
	}
	// A java launcher's libjvm.so, which it dlopens later (jvm.go).
	return append(mods, allocator.JVMForCommand(exe)...), nil
}

// withAllocator puts --allocator's file first among mods.
func withAllocator(file string, mods []allocator.Module) []allocator.Module {
	if file == "" {
		return mods
	}
	return append([]allocator.Module{{Path: file, Module: file, Exe: true}}, mods...)
}

// warmAllocator reads what pid's exec stop will bind (allocator.Bind):
// allocator keeps it, per file, for the stop's own Bind. It only fills
// that cache: a failure here is the stop's to report.
func warmAllocator(pid int, allocatorFile string) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	mods, err := execModules(exe, env)
	if err != nil {
		return
	}
	_, _ = allocator.Bind(withAllocator(allocatorFile, mods))
}
