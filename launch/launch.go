// Package launch starts a command under ptrace, stopped right after its
// execve, so that probes are in place before its first instruction runs
// (static constructors included); it stops it again when it exits, before its
// address space is torn down, so its mappings can still be read. Between
// those stops the command runs untouched: signals are passed through.
package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotFound and ErrNotExecutable say the command could not be started.
var (
	ErrNotFound      = errors.New("command not found")
	ErrNotExecutable = errors.New("command not executable")
)

// StopKind says why the command stopped.
type StopKind int

const (
	// Exec: it has just executed a new program, none of whose code has run.
	Exec StopKind = iota
	// Exit: it is exiting; its memory is still mapped.
	Exit
)

// Stop is a moment the command waits in; it resumes when Resume is called.
type Stop struct {
	Kind   StopKind
	PID    int
	resume chan struct{}
}

// Resume lets the command go on.
func (s Stop) Resume() { close(s.resume) }

// Child is a started command.
type Child struct {
	PID int
	// Stops delivers every Exec and Exit stop; each must be resumed.
	Stops <-chan Stop
	// Done delivers the wait status once the command has ended.
	Done <-chan syscall.WaitStatus
}

// Spec says what to start.
type Spec struct {
	Args           []string
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Start starts the command and returns once it is stopped at its first Exec
// stop (delivered on Stops).
func Start(s Spec) (*Child, error) {
	if len(s.Args) == 0 {
		return nil, fmt.Errorf("start: %w: empty command", ErrNotFound)
	}
	stops := make(chan Stop)
	done := make(chan syscall.WaitStatus, 1)
	started := make(chan error, 1)
	child := &Child{Stops: stops, Done: done}
	go func() {
		// Every ptrace request must come from the thread that attached.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(s.Args[0], s.Args[1:]...)
		cmd.Env = s.Env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			started <- startError(s.Args[0], err)
			return
		}
		child.PID = cmd.Process.Pid
		started <- nil
		done <- trace(child.PID, stops)
		close(stops)
		_ = cmd.Process.Release()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return child, nil
}

func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("start %s: %w", name, ErrNotFound)
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return fmt.Errorf("start %s: %w", name, ErrNotExecutable)
	}
	return fmt.Errorf("start %s: %w", name, err)
}

// trace runs the ptrace loop until the command ends and returns its status.
func trace(pid int, stops chan<- Stop) syscall.WaitStatus {
	stop := func(k StopKind) {
		s := Stop{Kind: k, PID: pid, resume: make(chan struct{})}
		stops <- s
		<-s.resume
	}
	var ws syscall.WaitStatus
	first := true
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			// ECHILD: nothing left to wait for; report what we have.
			return ws
		}
		if ws.Exited() || ws.Signaled() {
			return ws
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		deliver := 0
		switch {
		case first && sig == syscall.SIGTRAP:
			// The stop after the initial execve (PTRACE_TRACEME).
			first = false
			_ = syscall.PtraceSetOptions(pid, unix.PTRACE_O_TRACEEXIT|unix.PTRACE_O_TRACEEXEC)
			stop(Exec)
		case sig == syscall.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXEC:
			stop(Exec)
		case sig == syscall.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			stop(Exit)
		case groupStop(pid):
			// A stop signal already delivered: resuming is all a
			// PTRACE_TRACEME tracer can do (documented limitation).
		default:
			deliver = int(sig)
		}
		_ = syscall.PtraceCont(pid, deliver)
	}
}

// groupStop tells a group-stop from a signal-delivery-stop: only the latter
// has signal information.
func groupStop(pid int) bool {
	var info [128]byte
	_, _, errno := syscall.Syscall6(syscall.SYS_PTRACE, unix.PTRACE_GETSIGINFO,
		uintptr(pid), 0, uintptr(unsafe.Pointer(&info[0])), 0, 0)
	return errno == syscall.EINVAL
}

// ExitCode turns a wait status into a shell-style exit code.
func ExitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
