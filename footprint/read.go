package footprint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Read takes one reading of pid: /proc/PID/status for the RSS, smaps for
// every mapping's resident bytes, the threads' stack pointers, and, only
// where needed, a few words of glibc's headers (/proc/PID/mem) and the
// pagemap of tracked ranges that share a VMA with other memory. Its cost
// grows with the number of mappings and, inside the kernel, with resident
// pages (smaps walks the page tables); never with allocations.
func Read(pid int, o Options) (Reading, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	st, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	f, err := os.Open(dir + "/smaps")
	if err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	vmas, err := parseSmaps(f)
	f.Close()
	if err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	mem := &procMemory{dir: dir}
	defer mem.close()
	r := classify(vmas, threadSPs(dir), o, mem)
	if err := parseStatus(st, &r); err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	r.settle()
	return r, nil
}

// settle computes Unexplained from the RSS and the categories.
func (r *Reading) settle() {
	known := r.HeapResident + r.AnonResident + r.StackResident + r.FileResident
	if known < r.RSS {
		r.Unexplained = r.RSS - known
	}
}

// threadSPs reads each thread's stack pointer from /proc/PID/task/*/syscall
// ("nr args… sp pc" for a thread in a syscall or stopped, "running" for one
// on a CPU, whose stack is then found by its guard page instead).
func threadSPs(dir string) []uint64 {
	paths, _ := filepath.Glob(dir + "/task/*/syscall")
	var sps []uint64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := bytes.Fields(b)
		if len(f) < 3 {
			continue
		}
		sp, err := strconv.ParseUint(string(bytes.TrimPrefix(f[len(f)-2], []byte("0x"))), 16, 64)
		if err == nil && sp != 0 {
			sps = append(sps, sp)
		}
	}
	return sps
}

// procMemory reads /proc/PID/mem and /proc/PID/pagemap, opened on first use.
type procMemory struct {
	dir          string
	mem, pagemap *os.File
}

func (m *procMemory) read(b []byte, addr uint64) error {
	if m.mem == nil {
		f, err := os.Open(m.dir + "/mem")
		if err != nil {
			return err
		}
		m.mem = f
	}
	_, err := m.mem.ReadAt(b, int64(addr))
	return err
}

// pagemap entries: bit 63 says the page is present in RAM.
const (
	pageShift   = 12
	pagePresent = 1 << 63
	pagemapRead = 8192 // entries per read: 32 MiB of address space
)

func (m *procMemory) resident(start, end uint64) (uint64, error) {
	if m.pagemap == nil {
		f, err := os.Open(m.dir + "/pagemap")
		if err != nil {
			return 0, err
		}
		m.pagemap = f
	}
	buf := make([]byte, 8*pagemapRead)
	var n uint64
	for page := start >> pageShift; page < end>>pageShift; {
		k := min(end>>pageShift-page, pagemapRead)
		got, err := m.pagemap.ReadAt(buf[:8*k], int64(page*8))
		if err != nil && got == 0 {
			return 0, err
		}
		for i := 0; i+8 <= got; i += 8 {
			if binary.LittleEndian.Uint64(buf[i:])&pagePresent != 0 {
				n += 1 << pageShift
			}
		}
		page += uint64(got / 8)
	}
	return n, nil
}

func (m *procMemory) close() {
	for _, f := range []*os.File{m.mem, m.pagemap} {
		if f != nil {
			f.Close()
		}
	}
}
