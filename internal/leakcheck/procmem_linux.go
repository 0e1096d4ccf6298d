package leakcheck

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ProcessMemory reads another process's memory with process_vm_readv,
// falling back to /proc/PID/mem where that fails (a kernel without it, or
// a page it will not read). The process should be stopped.
type ProcessMemory struct {
	pid int
	mem *os.File // opened on first need
	// noVM: process_vm_readv is unavailable (ENOSYS, EPERM).
	noVM bool

	local  []unix.Iovec
	remote []unix.RemoteIovec
}

// OpenProcessMemory returns a reader of pid's memory.
func OpenProcessMemory(pid int) *ProcessMemory {
	return &ProcessMemory{pid: pid}
}

// Close releases /proc/PID/mem if it was opened.
func (m *ProcessMemory) Close() error {
	if m.mem != nil {
		return m.mem.Close()
	}
	return nil
}

// ReadAt reads len(p) bytes at addr; on a fault it returns the bytes read
// up to the first unreadable page.
func (m *ProcessMemory) ReadAt(p []byte, addr uint64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !m.noVM {
		n, err := m.readv(p, addr)
		if err == nil && n == len(p) {
			return n, nil
		}
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			m.noVM = true
		} else if err == nil || errors.Is(err, unix.EFAULT) || errors.Is(err, unix.EIO) {
			// A partial read stops at a page it could not read; let
			// /proc/PID/mem try the rest (it can read some mappings
			// process_vm_readv cannot, e.g. PROT_NONE under ptrace).
			got := max(n, 0)
			more, err := m.readMem(p[got:], addr+uint64(got))
			return got + more, err
		}
	}
	return m.readMem(p, addr)
}

func (m *ProcessMemory) readv(p []byte, addr uint64) (int, error) {
	local := []unix.Iovec{{Base: &p[0]}}
	local[0].SetLen(len(p))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}
	return unix.ProcessVMReadv(m.pid, local, remote, 0)
}

// readMem reads through /proc/PID/mem, page by page past a failure.
func (m *ProcessMemory) readMem(p []byte, addr uint64) (int, error) {
	if m.mem == nil {
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", m.pid))
		if err != nil {
			return 0, err
		}
		m.mem = f
	}
	done := 0
	for done < len(p) {
		// Reads of addresses past 2^63 need the offset as an unsigned
		// value: pread takes an off_t, which the kernel treats as
		// unsigned for /proc/PID/mem.
		n, err := unix.Pread(int(m.mem.Fd()), p[done:], int64(addr+uint64(done)))
		if n > 0 {
			done += n
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err == nil {
			err = fmt.Errorf("read %#x: end of memory", addr+uint64(done))
		}
		return done, err
	}
	return done, nil
}

// ReadBatch reads many ranges with few process_vm_readv calls (up to 1024
// ranges each); a range that faults is read again alone.
func (m *ProcessMemory) ReadBatch(bufs [][]byte, addrs []uint64, n []int) {
	if m.noVM {
		for i := range bufs {
			n[i], _ = m.ReadAt(bufs[i], addrs[i])
		}
		return
	}
	for i := 0; i < len(bufs); {
		// Build up to maxIOV iovecs of non-empty ranges.
		m.local, m.remote = m.local[:0], m.remote[:0]
		first := i
		for ; i < len(bufs) && len(m.remote) < maxIOV; i++ {
			if len(bufs[i]) == 0 {
				continue
			}
			v := unix.Iovec{Base: &bufs[i][0]}
			v.SetLen(len(bufs[i]))
			m.local = append(m.local, v)
			m.remote = append(m.remote, unix.RemoteIovec{Base: uintptr(addrs[i]), Len: len(bufs[i])})
		}
		got := 0
		if len(m.remote) > 0 {
			var err error
			got, err = unix.ProcessVMReadv(m.pid, m.local, m.remote, 0)
			if err != nil {
				got = 0
				if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
					m.noVM = true
				}
			}
		}
		// Ranges are filled in order: whole ones first, then at most one
		// partial, then nothing.
		for k := first; k < i; k++ {
			l := len(bufs[k])
			switch {
			case got >= l:
				n[k] = l
				got -= l
			default:
				n[k], _ = m.ReadAt(bufs[k], addrs[k])
				got = 0
			}
		}
	}
}

// Fork returns another reader of the same process, for another goroutine.
func (m *ProcessMemory) Fork() Memory {
	return &ProcessMemory{pid: m.pid, noVM: m.noVM}
}

var (
	_ BatchMemory = (*ProcessMemory)(nil)
	_ ForkMemory  = (*ProcessMemory)(nil)
)
