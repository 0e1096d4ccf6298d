package footprint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Read takes one reading of pid: /proc/PID/status for the RSS, smaps for
// every mapping's resident bytes, the threads' stack pointers, and, only
// where needed, a few words of glibc's headers (/proc/PID/mem) and the
// pagemap of tracked ranges that share a VMA with other memory. A process
// with more than manyMappings mappings is read from /proc/PID/maps and
// its pagemap instead of smaps: the same resident pages, at a sixth of the
// kernel's cost there (smaps prints two dozen fields per mapping). Its
// cost grows with the number of mappings and, inside the kernel, with
// resident pages (the page tables are walked); never with allocations.
func Read(pid int, o Options) (Reading, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	st, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	mem := &procMemory{dir: dir}
	defer mem.close()
	vmas, err := readVMAs(dir, mem)
	if err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	var gh *goHeap
	if g := goProgram(dir); g != nil {
		gh = findGoHeap(dir, g, vmas, mem)
	}
	if o.Detect {
		// A static Go program maps no libc: its anonymous memory is the
		// runtime's, not glibc's to recognize.
		o.Glibc = !mapsOtherAllocator(vmas) && (gh == nil || mapsLibc(vmas))
	}
	o.Python = o.Python || mapsPython(vmas)
	r := classify(vmas, threadSPs(dir), o, gh, mem)
	if c, ok := findPerfData(vmas, mem); ok {
		r.ManagedHeaps = jvmHeaps(vmas, c, mem)
	}
	if err := parseStatus(st, &r); err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	for i := range vmas {
		r.PSS += vmas[i].pss
	}
	if len(vmas) > manyMappings { // read from maps: no Pss lines
		r.PSS, _ = procfs.ReadRollupPSS(pid)
	}
	r.settle()
	r.Cgroup, r.CgroupMemory = cgroupMemory(dir)
	return r, nil
}

// ReadRollup takes a light reading of pid, for a process memtrace only
// lists (whole host): its RSS and parts and its swap from
// /proc/PID/status, its PSS from /proc/PID/smaps_rollup (one walk of its
// page tables, nothing per mapping written out), and its cgroup. A kernel
// thread has no memory of its own: ErrKernelThread.
func ReadRollup(pid int) (Reading, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	st, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	r := Reading{Rollup: true}
	if err := parseStatus(st, &r); err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, ErrKernelThread)
	}
	if r.PSS, err = procfs.ReadRollupPSS(pid); err != nil {
		return Reading{}, fmt.Errorf("footprint of %d: %w", pid, err)
	}
	r.Cgroup, r.CgroupMemory = cgroupMemory(dir)
	return r, nil
}

// ErrKernelThread: the process has no address space of its own (a kernel
// thread), or has lost it (a zombie).
var ErrKernelThread = errors.New("no user memory (a kernel thread or a zombie)")

// manyMappings is where Read turns from smaps to maps and pagemap (a
// variable for the tests).
var manyMappings = 4096

// readVMAs lists the mappings with their resident bytes.
func readVMAs(dir string, mem *procMemory) ([]vma, error) {
	vmas, err := parseFile(dir + "/maps")
	if err != nil || len(vmas) <= manyMappings {
		return parseFile(dir + "/smaps")
	}
	for i := range vmas {
		v := &vmas[i]
		if v.rss, err = mem.resident(v.start, v.end); err != nil {
			return nil, fmt.Errorf("pagemap: %w", err)
		}
	}
	return vmas, nil
}

func parseFile(path string) ([]vma, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSmaps(f)
}

// otherAllocators are the shared libraries of allocators that replace
// glibc's malloc.
var otherAllocators = []string{"libjemalloc.so", "libtcmalloc", "libmimalloc.so"}

func mapsOtherAllocator(vmas []vma) bool {
	for i := range vmas {
		base := filepath.Base(vmas[i].path)
		for _, a := range otherAllocators {
			if strings.HasPrefix(base, a) {
				return true
			}
		}
	}
	return false
}

// mapsPython reports whether a CPython interpreter is mapped: a
// libpython3.x.so, or an executable named python3.x with it linked in.
func mapsPython(vmas []vma) bool {
	for i := range vmas {
		base := filepath.Base(vmas[i].path)
		if strings.HasPrefix(base, "libpython3") || (strings.HasPrefix(base, "python3") && vmas[i].perms[2] == 'x') {
			return true
		}
	}
	return false
}

func mapsLibc(vmas []vma) bool {
	for i := range vmas {
		if isLibc(vmas[i].path) {
			return true
		}
	}
	return false
}

func isLibc(path string) bool { return strings.HasPrefix(filepath.Base(path), "libc.so") }

// cgroupMemory reads the process's memory cgroup from /proc/PID/cgroup
// and what that cgroup is charged: memory.current under cgroup v2
// ("0::/system.slice/x.service"), memory.usage_in_bytes under v1's memory
// controller ("4:memory:/x"), which hybrid hosts use. "" and 0 when
// unknown (the root cgroup has neither file).
func cgroupMemory(dir string) (string, uint64) {
	b, err := os.ReadFile(dir + "/cgroup")
	if err != nil {
		return "", 0
	}
	var file, path string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		switch {
		case len(f) < 3:
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			file, path = filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.usage_in_bytes"), f[2]
		case f[0] == "0" && f[1] == "" && file == "":
			file, path = filepath.Join("/sys/fs/cgroup", f[2], "memory.current"), f[2]
		}
	}
	cur, err := os.ReadFile(file)
	if err != nil {
		return path, 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(cur)), 10, 64)
	return path, n
}

// settle computes Unexplained from the RSS and the categories.
func (r *Reading) settle() {
	known := r.HeapResident + r.AnonResident + r.StackResident + r.FileResident + r.GoHeap.Resident + r.GoRuntimeResident
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

// procMemory reads /proc/PID/mem and /proc/PID/pagemap, opened on first
// use. Pagemap is read a window at a time: mappings are visited in address
// order, so one read serves many small neighbours.
type procMemory struct {
	dir     string
	mem     *os.File
	pagemap *procfs.Pagemap
	win     []byte // pagemap entries of pages winLo, winLo+1, …
	winLo   uint64
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

const (
	pageShift   = 12
	pagemapRead = 8192 // entries per read: 32 MiB of address space
)

func (m *procMemory) resident(start, end uint64) (uint64, error) {
	if m.pagemap == nil {
		f, err := procfs.OpenPagemapIn(m.dir)
		if err != nil {
			return 0, err
		}
		m.pagemap = f
		m.win = make([]byte, 0, 8*pagemapRead)
	}
	var n uint64
	for page := start >> pageShift; page < end>>pageShift; page++ {
		i := page - m.winLo
		if page < m.winLo || (i+1)*8 > uint64(len(m.win)) {
			got, err := m.pagemap.ReadAt(m.win[:cap(m.win)], page)
			if got == 0 {
				if err == io.EOF {
					return n, nil // past the user address space ([vsyscall])
				}
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return 0, err
			}
			m.win, m.winLo, i = m.win[:got*8], page, 0
		}
		if procfs.Entry(m.win, i).Present() {
			n += 1 << pageShift
		}
	}
	return n, nil
}

func (m *procMemory) close() {
	if m.mem != nil {
		m.mem.Close()
	}
	if m.pagemap != nil {
		m.pagemap.Close()
	}
}
