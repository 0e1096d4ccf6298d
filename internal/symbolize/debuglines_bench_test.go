package symbolize

import (
	"debug/elf"
	"os/exec"
	"runtime"
	"testing"
)

// libcPath is the C library the benchmarks below read with its separate
// debug file (libc6-dbg).
const libcPath = "/lib/x86_64-linux-gnu/libc.so.6"

// BenchmarkLibcDebugLines names 10 addresses spread over libc with the
// lines of libc6-dbg's debug file: open the module, find and check the
// debug file, read its DWARF, name them. A report of a short run does
// this. live-B is the heap the module still holds after.
func BenchmarkLibcDebugLines(b *testing.B) {
	addrs := libcFuncAddrs(b, 10)
	var live uint64
	for b.Loop() {
		m, err := OpenModule(libcPath)
		if err != nil {
			b.Fatal(err)
		}
		m.debugCands = findDebugFiles(m, libcPath, []string{""}, []string{DefaultDebugDir})
		if m.DebugFile() == "" {
			b.Skip("no debug file for libc (libc6-dbg)")
		}
		for _, a := range addrs {
			if f, _ := m.Line(a); f == "" {
				b.Fatalf("Line(%#x): no line", a)
			}
			m.Function(a)
		}
		b.StopTimer()
		live = liveHeap()
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(live), "live-B")
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// libcFuncAddrs returns n addresses, each 4 bytes into a function of libc's
// .dynsym, spread over it.
func libcFuncAddrs(b *testing.B, n int) []uint64 {
	f, err := elf.Open(libcPath)
	if err != nil {
		b.Skipf("open libc: %v", err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		b.Fatal(err)
	}
	var funcs []uint64
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Size > 8 {
			funcs = append(funcs, s.Value+4)
		}
	}
	if len(funcs) < n {
		b.Fatalf("libc has %d functions", len(funcs))
	}
	var out []uint64
	for i := range n {
		out = append(out, funcs[i*len(funcs)/n])
	}
	return out
}

// BenchmarkFunctionSymbols reads the function symbols of the largest
// binary memtrace meets on these machines, node's (110 000 symbols,
// 7.5 MB of names), as naming its first call site does: the time per
// read, alloc-MB, all that a read allocates, and kept-MB, the heap the
// table holds after.
func BenchmarkFunctionSymbols(b *testing.B) {
	path, err := exec.LookPath("node")
	if err != nil {
		b.Skip("no node")
	}
	var alloc, kept uint64
	var syms int
	for b.Loop() {
		b.StopTimer()
		var before, after runtime.MemStats
		base := liveHeap()
		runtime.ReadMemStats(&before)
		m, err := OpenModule(path)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		m.loadSymbols()
		b.StopTimer()
		runtime.ReadMemStats(&after)
		kept = liveHeap() - base
		alloc += after.TotalAlloc - before.TotalAlloc
		if m.symErr != nil {
			b.Fatal(m.symErr)
		}
		syms = len(m.syms.syms)
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MB")
	b.ReportMetric(float64(kept)/(1<<20), "kept-MB")
	b.ReportMetric(float64(syms), "functions")
}
