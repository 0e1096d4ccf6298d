package footprint

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// benchHeap is the size of BenchmarkRead's heap; MEMTRACE_BENCH_HEAP_GIB
// changes it (make bench's quick run uses 1).
func benchHeap() int {
	if n, err := strconv.Atoi(os.Getenv("MEMTRACE_BENCH_HEAP_GIB")); err == nil && n > 0 {
		return n << 30
	}
	return 10 << 30
}

// BenchmarkRead measures one reading of this process, side by side with
// reading /proc/self/smaps and status without parsing them (the kernel's
// part of a reading below manyMappings mappings; above, Read takes maps
// and pagemap instead):
//   - mappings=100000: 100 000 one-page anonymous mappings, every other
//     one PROT_NONE so that the kernel cannot merge them; the 50 000
//     accessible ones are tracked ranges (each one's state is computed).
//     vm.max_map_count is raised for it if lower (root), then restored;
//   - heap=10GiB: one anonymous mapping of 10 GiB, every 4 KiB page
//     resident (no huge pages), taken as the heap.
func BenchmarkRead(b *testing.B) {
	b.Run("mappings=100000", func(b *testing.B) {
		const n = 50000 // tracked pages, each followed by a PROT_NONE one: 100 000 mappings
		restore, err := raiseMapCount(2*n + 10000)
		if err != nil {
			b.Skip("vm.max_map_count is too low for 100 000 mappings and cannot be raised:", err)
		}
		defer restore()
		// One reservation cut into pages of alternating protection: no
		// other mapping lands between them.
		mem, err := unix.Mmap(-1, 0, 2*n*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			b.Skip("mmap:", err)
		}
		defer unix.Munmap(mem)
		ranges := make([]Range, 0, n)
		base := uint64(uintptr(unsafePointer(mem)))
		for i := 0; i < 2*n; i += 2 {
			mem[i*4096] = 1
			if err := unix.Mprotect(mem[(i+1)*4096:(i+2)*4096], unix.PROT_NONE); err != nil {
				b.Skip("mprotect:", err)
			}
			ranges = append(ranges, Range{Start: base + uint64(i)*4096, End: base + uint64(i+1)*4096})
		}
		benchReadings(b, Options{Ranges: ranges, Glibc: true})
	})
	b.Run("heap=10GiB", func(b *testing.B) {
		size := benchHeap()
		mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			b.Skip("mmap:", err)
		}
		defer unix.Munmap(mem)
		unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
		for i := 0; i < size; i += 4096 {
			mem[i] = 1
		}
		benchReadings(b, Options{Detect: true})
	})
}

// benchReadings runs Read and the kernel-only reading as sub-benchmarks.
func benchReadings(b *testing.B, o Options) {
	pid := os.Getpid()
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile("/proc/self/smaps"); err != nil {
				b.Fatal(err)
			}
			if _, err := os.ReadFile("/proc/self/status"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := Read(pid, o); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// raiseMapCount makes vm.max_map_count at least n for the benchmark.
func raiseMapCount(n int) (restore func(), err error) {
	const path = "/proc/sys/vm/max_map_count"
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if cur, _ := strconv.Atoi(string(old[:len(old)-1])); cur >= n {
		return func() {}, nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0); err != nil {
		return nil, err
	}
	return func() { os.WriteFile(path, old, 0) }, nil
}

// BenchmarkReadRollup measures the whole host's light reading of one
// process (status and smaps_rollup): this test process, small, and
// with 1 GiB resident (smaps_rollup walks the page tables).
func BenchmarkReadRollup(b *testing.B) {
	b.Run("small", func(b *testing.B) {
		for b.Loop() {
			if _, err := ReadRollup(os.Getpid()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("heap=1GiB", func(b *testing.B) {
		mem, err := unix.Mmap(-1, 0, 1<<30, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Munmap(mem)
		unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		for b.Loop() {
			if _, err := ReadRollup(os.Getpid()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
