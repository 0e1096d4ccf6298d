package pagewalk

import (
	"os"
	"sort"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/residency"
)

// BenchmarkEpoch: what --access spends reading one epoch of a heap of
// 1 MiB blocks, every page resident: clearing the bits, the page-table
// walk, pagemap, and folding the reading (as session's endAccessEpoch
// does). It reports ms of memtrace's CPU (user + system) per epoch and
// per GiB (bench/access.go reads them). The heap is the benchmark's own.
func BenchmarkEpoch(b *testing.B) {
	for _, size := range []struct {
		name string
		mib  int
	}{{"256MiB", 256}, {"1GiB", 1024}, {"4GiB", 4096}, {"10GiB", 10240}} {
		b.Run(size.name, func(b *testing.B) { benchEpoch(b, size.mib) })
	}
}

func benchEpoch(b *testing.B, mib int) {
	if os.Geteuid() != 0 {
		b.Skip("the page-table walk needs root")
	}
	w, err := Open()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const ps = 4096
	heap, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		b.Skipf("map %d MiB: %v", mib, err)
	}
	defer syscall.Munmap(heap)
	syscall.Madvise(heap, syscall.MADV_NOHUGEPAGE) // 4 KiB pages: the walk's worst case
	for i := 0; i < len(heap); i += ps {
		heap[i] = 1
	}
	base := uint64(uintptr(unsafe.Pointer(&heap[0])))
	blocks := make([]access.Block, mib)
	for i := range blocks {
		blocks[i] = access.Block{Addr: base + uint64(i)<<20, Size: 1 << 20, Site: aggregate.SiteKey{Address: uint64(i % 16), StackID: -1}}
	}
	pid := os.Getpid()
	tr := access.NewTracker(ps, access.DefaultColdAfter, 0)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	start := cpu()
	for n := 0; n < b.N; n++ {
		if err := Clear(pid); err != nil {
			b.Fatal(err)
		}
		ranges := access.Ranges(blocks, ps, 64)
		m, err := residency.OpenPagemap(pid, ps)
		if err != nil {
			b.Fatal(err)
		}
		runs := &access.Runs{PageSize: ps}
		for _, r := range ranges {
			run, err := m.AccessRun(r, false)
			if err != nil {
				b.Fatal(err)
			}
			runs.Runs = append(runs.Runs, run)
		}
		m.Close()
		if _, err := w.Walk(pid, ranges[0].Start, ranges[len(ranges)-1].End, func(start uint64, t *Table) {
			i := sort.Search(len(runs.Runs), func(i int) bool { return runs.Runs[i].Start > start }) - 1
			if i >= 0 {
				r := &runs.Runs[i]
				for j, bits := range t {
					if k := (start-r.Start)/ps + uint64(j); bits&Accessed != 0 && k < uint64(len(r.Pages)) {
						r.Pages[k] |= access.Accessed
					}
				}
			}
		}); err != nil {
			b.Fatal(err)
		}
		tr.End(uint64(n+1), blocks, runs, false, "bench")
	}
	used := cpu() - start
	b.StopTimer()
	perEpoch := float64(used.Microseconds()) / 1e3 / float64(b.N)
	b.ReportMetric(perEpoch, "cpu-ms/epoch")
	b.ReportMetric(perEpoch/(float64(mib)/1024), "cpu-ms/GiB")
}
