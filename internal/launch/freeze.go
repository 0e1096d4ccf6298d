package launch

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Thread is one stopped thread of a frozen process.
type Thread struct {
	TID  int
	Regs unix.PtraceRegs
}

// Frozen is a running process (one not started by Start) stopped with
// PTRACE_SEIZE and PTRACE_INTERRUPT, every thread of it, so that its memory
// can be read consistently. Release lets it go on as if nothing happened
// (a signal that arrived meanwhile is delivered then).
type Frozen struct {
	PID     int
	Threads []Thread
	release chan struct{}
	done    chan error
}

// Freeze stops every thread of pid and reads their registers. All ptrace
// requests, Release's included, come from one locked OS thread.
func Freeze(pid int) (*Frozen, error) {
	f := &Frozen{PID: pid, release: make(chan struct{}), done: make(chan error, 1)}
	frozen := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pending := map[int]int{} // seized tid -> signal to deliver on detach
		err := f.freeze(pending)
		frozen <- err
		if err == nil {
			<-f.release
		}
		f.done <- thaw(pending)
	}()
	if err := <-frozen; err != nil {
		return nil, err
	}
	return f, nil
}

// Release detaches from every thread.
func (f *Frozen) Release() error {
	close(f.release)
	return <-f.done
}

func (f *Frozen) freeze(pending map[int]int) error {
	// Seize and interrupt every thread; threads started meanwhile show up
	// on the next pass.
	for pass := 0; ; pass++ {
		tids, err := tasks(f.PID)
		if err != nil {
			return fmt.Errorf("freeze %d: %w", f.PID, err)
		}
		added := 0
		for _, tid := range tids {
			if _, ok := pending[tid]; ok {
				continue
			}
			if err := unix.PtraceSeize(tid); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // exited meanwhile
				}
				return fmt.Errorf("freeze %d: seize thread %d: %w", f.PID, tid, err)
			}
			pending[tid] = 0
			added++
			if err := unix.PtraceInterrupt(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("freeze %d: interrupt thread %d: %w", f.PID, tid, err)
			}
			if !waitStopped(tid, pending) {
				delete(pending, tid)
			}
		}
		if added == 0 {
			break
		}
		if pass > 1000 {
			return fmt.Errorf("freeze %d: threads keep appearing", f.PID)
		}
	}
	if len(pending) == 0 {
		return fmt.Errorf("freeze %d: no thread could be stopped", f.PID)
	}
	for tid := range pending {
		var t Thread
		t.TID = tid
		if err := unix.PtraceGetRegs(tid, &t.Regs); err != nil {
			continue
		}
		f.Threads = append(f.Threads, t)
	}
	return nil
}

// waitStopped waits for tid's interrupt stop; a signal that stops it first
// is remembered for detach. It reports false when the thread is gone.
func waitStopped(tid int, pending map[int]int) bool {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(tid, &ws, unix.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || ws.Exited() || ws.Signaled() {
			return false
		}
		if !ws.Stopped() {
			continue
		}
		// PTRACE_EVENT_STOP: the interrupt, or a group-stop (under SEIZE
		// both are reported so, whatever the stop signal).
		if (uint32(ws)>>16)&0xff == unix.PTRACE_EVENT_STOP {
			return true
		}
		// A signal-delivery stop came first: the thread is stopped all the
		// same; deliver the signal on detach.
		pending[tid] = int(ws.StopSignal())
		return true
	}
}

// thaw detaches from every seized thread.
func thaw(pending map[int]int) error {
	var first error
	for tid, sig := range pending {
		_, _, errno := syscall.Syscall6(syscall.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(tid), 0, uintptr(sig), 0, 0)
		if errno != 0 && errno != syscall.ESRCH && first == nil {
			first = fmt.Errorf("detach thread %d: %w", tid, errno)
		}
	}
	return first
}

func tasks(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: process %d", os.ErrNotExist, pid)
		}
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}

// GPRegs are the registers a leak check scans, as valgrind does: the
// general-purpose ones.
func GPRegs(r *unix.PtraceRegs) []uint64 {
	return []uint64{r.Rax, r.Rbx, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Rbp, r.Rsp,
		r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15}
}
