package footprint

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPagemapAgreesWithSmaps: the resident bytes Read takes from pagemap
// for a process with many mappings are smaps' Rss, on a mapping of this
// process with 20 of its 64 pages touched.
func TestPagemapAgreesWithSmaps(t *testing.T) {
	if _, err := os.Stat("/proc/self/pagemap"); err != nil {
		t.Skip("no pagemap:", err)
	}
	// 64 pages between two PROT_NONE ones: a VMA of its own, which the
	// Go runtime's mappings cannot merge with and change meanwhile.
	mem, err := unix.Mmap(-1, 0, 66*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	unix.Mprotect(mem[:4096], unix.PROT_NONE)
	unix.Mprotect(mem[65*4096:], unix.PROT_NONE)
	unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	for i := 0; i < 20; i++ {
		mem[(1+3*i)*4096] = 1
	}
	start := uint64(uintptr(unsafePointer(mem))) + 4096
	vmas, err := parseFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	m := &procMemory{dir: "/proc/self"}
	defer m.close()
	found := false
	for _, v := range vmas {
		if v.start != start || v.end != start+64*4096 {
			continue
		}
		found = true
		got, err := m.resident(v.start, v.end)
		if err != nil {
			t.Fatal(err)
		}
		if got != v.rss || got != 20*4096 {
			t.Errorf("pagemap %d bytes, smaps Rss %d, 20 pages touched", got, v.rss)
		}
	}
	if !found {
		t.Fatal("the mapping is not in smaps")
	}
	// The whole process, [vsyscall] included, reads without error.
	for _, v := range vmas {
		if _, err := m.resident(v.start, v.end); err != nil {
			t.Errorf("pagemap of %x-%x %s: %v", v.start, v.end, v.path, err)
		}
	}
}

// TestReadBothWays: a tracked range's state is the same whether the
// process is read from smaps or from maps and pagemap.
func TestReadBothWays(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, 32*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	unix.Mprotect(mem[16*4096:], unix.PROT_NONE)
	for i := 0; i < 8; i++ {
		mem[i*4096] = 1
	}
	addr := uint64(uintptr(unsafePointer(mem)))
	o := Options{Ranges: []Range{{Start: addr, End: addr + 32*4096}}}
	want := State{Reserved: 32 * 4096, Committed: 16 * 4096, Resident: 8 * 4096}
	defer func(n int) { manyMappings = n }(manyMappings)
	for _, n := range []int{1 << 30, 0} {
		manyMappings = n
		r, err := Read(os.Getpid(), o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Ranges[0] != want || r.RSS == 0 {
			t.Errorf("manyMappings %d: range %+v, want %+v (rss %d)", n, r.Ranges[0], want, r.RSS)
		}
	}
}
