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

	"github.com/memtrace/memtrace/internal/outfile"
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
	// Exit: it is exiting; its memory is still mapped. Regs holds the
	// registers of the exiting thread.
	Exit
	// Fork (Spec.Follow only): a process the command (or one of its
	// traced descendants) forked, vforked or cloned as a new process; it
	// is stopped before running any instruction, with the memory of its
	// parent (Parent). Threads are not followed.
	Fork
	// Ended (Spec.Follow only): a followed process ended (Status); it no
	// longer exists, so Resume does nothing. The command's own end is
	// delivered on Child.Done instead.
	Ended
)

func (k StopKind) String() string {
	switch k {
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	case Fork:
		return "fork"
	case Ended:
		return "ended"
	}
	return fmt.Sprintf("StopKind(%d)", int(k))
}

// Stop is a moment a traced process waits in; it resumes when Resume is
// called.
type Stop struct {
	Kind StopKind
	PID  int
	// Regs (Exit only) are the exiting thread's registers: its stack
	// pointer, and values a leak check counts as roots.
	Regs *unix.PtraceRegs
	// Parent (Fork only) is the process that forked PID.
	Parent int
	// SharedVM (Fork only): PID was made by vfork (posix_spawn does it)
	// and runs in its parent's memory until it execs or exits.
	SharedVM bool
	// Status (Ended only) is how the process ended.
	Status syscall.WaitStatus
	resume chan struct{}
}

// Resume lets the process go on.
func (s Stop) Resume() {
	if s.resume != nil {
		close(s.resume)
	}
}

// Child is a started command.
type Child struct {
	PID int
	// Stops delivers every stop of the command and, with Spec.Follow, of
	// the processes it starts; each must be resumed. It is closed once
	// every traced process has ended.
	Stops <-chan Stop
	// Done delivers the command's wait status once it has ended (followed
	// processes may still run).
	Done <-chan syscall.WaitStatus
}

// Spec says what to start.
type Spec struct {
	Args           []string
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Follow traces the processes the command forks (fork, vfork,
	// posix_spawn, clone of a new process), and theirs: each gets Fork,
	// Exec, Exit and Ended stops of its own.
	Follow bool
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
		// The command gets memtrace's own streams, not a pipe copied
		// through a wrapper: it must see its terminal as it would untraced.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, streamOf(s.Stdout), streamOf(s.Stderr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := cmd.Start(); err != nil {
			started <- startError(s.Args[0], err)
			return
		}
		child.PID = cmd.Process.Pid
		started <- nil
		trace(child.PID, s.Follow, stops, done)
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

// trace runs the ptrace loop until every traced process has ended; it
// sends the command's status on done when the command ends.
func trace(pid int, follow bool, stops chan<- Stop, done chan<- syscall.WaitStatus) {
	stop := func(s Stop) {
		s.resume = make(chan struct{})
		stops <- s
		<-s.resume
	}
	options := unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_TRACEEXEC
	if follow {
		// A new thread is not followed (no TRACECLONE): clone(2) of a
		// process reports as a fork (SIGCHLD exit signal) or a vfork
		// (CLONE_VFORK, as posix_spawn does).
		options |= unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK
	}
	traced := map[int]bool{pid: true}
	// A new process's first stop and its parent's fork event come in
	// either order: early holds those that stopped first.
	early := map[int]bool{}
	first, commandDone := true, false
	var ws syscall.WaitStatus
	for {
		// __WNOTHREAD: only this thread's children and tracees, never a
		// child another goroutine started (and will wait for).
		wpid, err := syscall.Wait4(-1, &ws, unix.WALL|unix.WNOTHREAD, nil)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			// ECHILD: nothing left to wait for.
			if !commandDone {
				done <- ws
			}
			return
		}
		if ws.Exited() || ws.Signaled() {
			was := traced[wpid]
			delete(traced, wpid)
			switch {
			case wpid == pid:
				commandDone = true
				done <- ws
			case was:
				stop(Stop{Kind: Ended, PID: wpid, Status: ws})
			}
			continue
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		deliver := 0
		switch {
		case !traced[wpid]:
			// A new process's first stop (its SIGSTOP), before its
			// parent's fork event: it stays stopped until that event.
			early[wpid] = true
			continue
		case wpid == pid && first && sig == syscall.SIGTRAP:
			// The stop after the initial execve (PTRACE_TRACEME).
			first = false
			_ = syscall.PtraceSetOptions(pid, options)
			stop(Stop{Kind: Exec, PID: wpid})
		case sig == syscall.SIGTRAP && (ws.TrapCause() == unix.PTRACE_EVENT_FORK ||
			ws.TrapCause() == unix.PTRACE_EVENT_VFORK || ws.TrapCause() == unix.PTRACE_EVENT_CLONE):
			if msg, err := unix.PtraceGetEventMsg(wpid); err == nil {
				kid := int(msg)
				// The child is delivered before its parent goes on, so
				// that no parent can exit with a child still unannounced:
				// wait for its first stop if it has not come yet.
				if early[kid] || waitFirstStop(kid) {
					delete(early, kid)
					traced[kid] = true
					stop(Stop{Kind: Fork, PID: kid, Parent: wpid, SharedVM: ws.TrapCause() == unix.PTRACE_EVENT_VFORK})
					_ = syscall.PtraceCont(kid, 0)
				}
			}
		case sig == syscall.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXEC:
			stop(Stop{Kind: Exec, PID: wpid})
		case sig == syscall.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			st := Stop{Kind: Exit, PID: wpid}
			var regs unix.PtraceRegs
			if err := unix.PtraceGetRegs(wpid, &regs); err == nil {
				st.Regs = &regs
			}
			stop(st)
		case groupStop(wpid):
			// A stop signal already delivered: resuming is all a
			// PTRACE_TRACEME tracer can do (documented limitation).
		default:
			deliver = int(sig)
		}
		_ = syscall.PtraceCont(wpid, deliver)
	}
}

// waitFirstStop waits for a new tracee's first stop; false if it ended
// first.
func waitFirstStop(kid int) bool {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(kid, &ws, unix.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || ws.Exited() || ws.Signaled() {
			return false
		}
		if ws.Stopped() {
			return true
		}
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

// streamOf is the *os.File behind w (outfile.Patient's), so that exec
// hands the command the file itself; any other writer as it is.
func streamOf(w io.Writer) io.Writer {
	if f, ok := outfile.Underlying(w); ok {
		return f
	}
	return w
}
