package leakcheck

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"unsafe"
)

// flatMemory is one contiguous range of memory: the benchmark's heap,
// read with a copy as process_vm_readv would.
type flatMemory struct {
	base     uint64
	data     []byte
	root     []byte
	rootBase uint64
}

func (m *flatMemory) ReadAt(p []byte, addr uint64) (int, error) {
	for _, r := range []struct {
		base uint64
		data []byte
	}{{m.base, m.data}, {m.rootBase, m.root}} {
		if addr >= r.base && addr < r.base+uint64(len(r.data)) {
			return copy(p, r.data[addr-r.base:]), nil
		}
	}
	return 0, nil
}

func (m *flatMemory) ReadBatch(bufs [][]byte, addrs []uint64, n []int) {
	for i := range bufs {
		n[i], _ = m.ReadAt(bufs[i], addrs[i])
	}
}

// Fork: flatMemory is only read, so its readers can share it.
func (m *flatMemory) Fork() Memory { return m }

// syntheticHeap lays out `total` bytes of blocks of `size` bytes in a Go
// byte slice (at its real addresses). Most blocks form a binary tree over
// a random permutation: each block's first two words point to its
// children, the rest hold small integers, and the roots point to the tree's
// root. Every tree block is reachable, in an order that jumps all over the
// heap (the worst case for reading it). The last lostPct percent of the
// permutation are lost instead, in chains of 4 (one definitely lost head,
// three indirectly lost), for the clique phase.
func syntheticHeap(tb testing.TB, total, size uint64, lostPct int) (*flatMemory, []Block, []Range) {
	tb.Helper()
	n := total / size
	data := make([]byte, total)
	root := make([]byte, 4096)
	base := uint64(uintptr(unsafe.Pointer(&data[0])))
	rootBase := uint64(uintptr(unsafe.Pointer(&root[0])))
	blocks := make([]Block, n)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := uint64(0); i < n; i++ {
		blocks[i] = Block{Addr: base + i*size, Size: size}
		off := i * size
		for w := uint64(2); w < size/8; w++ {
			binary.LittleEndian.PutUint64(data[off+8*w:], uint64(rng.IntN(1000)))
		}
	}
	perm := rng.Perm(int(n))
	tree := int(n) - int(n)*lostPct/100
	put := func(from int, slot uint64, to int) {
		binary.LittleEndian.PutUint64(data[uint64(from)*size+slot:], blocks[to].Addr)
	}
	for k := 1; k < tree; k++ {
		put(perm[(k-1)/2], uint64((k-1)%2)*8, perm[k])
	}
	for k := tree; k+1 < int(n); k++ {
		if (k-tree)%4 != 3 {
			put(perm[k], 0, perm[k+1])
		}
	}
	binary.LittleEndian.PutUint64(root, blocks[perm[0]].Addr)
	mem := &flatMemory{base: base, data: data, root: root, rootBase: rootBase}
	return mem, blocks, []Range{{rootBase, rootBase + uint64(len(root))}}
}

// BenchmarkMark1GB measures the check of 1 GiB of live heap: the mark
// phase follows pointers block by block across the whole heap, batches of
// blocks being read with one call each. "copy" reads with memcpy (the
// classifier's own cost); "process_vm_readv" reads the same memory through
// the system call memtrace uses on a stopped target (here the benchmark's
// own process), which is the cost a user sees.
func BenchmarkMark1GB(b *testing.B) {
	const total = 1 << 30
	for _, size := range []uint64{64, 1024} {
		mem, blocks, roots := syntheticHeap(b, total, size, 5)
		for _, via := range []string{"copy", "process_vm_readv"} {
			b.Run(fmt.Sprintf("blocks=%dB/%s", size, via), func(b *testing.B) {
				var m Memory = mem
				if via == "process_vm_readv" {
					pm := OpenProcessMemory(os.Getpid())
					defer pm.Close()
					m = pm
				}
				b.SetBytes(total)
				b.ReportAllocs()
				var res *Result
				for b.Loop() {
					var err error
					res, err = Check(Input{Blocks: blocks, Mem: m, Roots: roots, Heuristics: AllHeuristics})
					if err != nil {
						b.Fatal(err)
					}
				}
				runtime.KeepAlive(mem)
				t := res.Totals(blocks)
				b.ReportMetric(float64(len(blocks)), "blocks")
				b.ReportMetric(float64(t.Blocks[Definite]+t.Blocks[Indirect]), "lost-blocks")
			})
		}
	}
}

// chainHeap lays out n blocks of 48 bytes 64 bytes apart (as glibc's
// malloc(48) places them), each pointing to the next, with every
// lostEvery-th block left out of the chain (definitely lost), and a root
// pointing to the first: testdata/bench/hold.c's heap.
func chainHeap(tb testing.TB, n, lostEvery int) (*flatMemory, []Block, []Range) {
	tb.Helper()
	const stride, size = 64, 48
	data := make([]byte, n*stride)
	root := make([]byte, 4096)
	base := uint64(uintptr(unsafe.Pointer(&data[0])))
	rootBase := uint64(uintptr(unsafe.Pointer(&root[0])))
	blocks := make([]Block, n)
	prev := -1
	for i := range n {
		blocks[i] = Block{Addr: base + uint64(i)*stride + 16, Size: size}
		if i%lostEvery == lostEvery-1 {
			continue
		}
		if prev < 0 {
			binary.LittleEndian.PutUint64(root, blocks[i].Addr)
		} else {
			binary.LittleEndian.PutUint64(data[prev*stride+16:], blocks[i].Addr)
		}
		prev = i
	}
	return &flatMemory{base: base, data: data, root: root, rootBase: rootBase}, blocks, []Range{{rootBase, rootBase + uint64(len(root))}}
}

// BenchmarkCheckChain5M checks testdata/bench/hold.c's heap (5 million
// blocks of 48 bytes in one chain, one in 1000 lost) read through
// process_vm_readv from this process, as memtrace reads a stopped
// target: make bench's "heapscale" section runs the same heap end to
// end. B/block is what the check allocates per block (its index, states,
// graph and result; the blocks are the caller's).
func BenchmarkCheckChain5M(b *testing.B) {
	const n = 5_000_000
	mem, blocks, roots := chainHeap(b, n, 1000)
	pm := OpenProcessMemory(os.Getpid())
	defer pm.Close()
	b.SetBytes(n * 48)
	var res *Result
	var perBlock float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var err error
		res, err = Check(Input{Blocks: blocks, Mem: pm, Roots: roots, Heuristics: AllHeuristics})
		if err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		perBlock = float64(after.TotalAlloc-before.TotalAlloc) / n
	}
	runtime.KeepAlive(mem)
	t := res.Totals(blocks)
	if t.Blocks[Definite] != n/1000 || t.Blocks[Reachable] != n-n/1000 {
		b.Fatalf("totals %+v", t)
	}
	b.ReportMetric(perBlock, "B/block")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/block")
}

// TestSyntheticHeapAgrees checks the benchmark's heap (small) with the
// sequential reference, so the benchmark measures a correct check.
func TestSyntheticHeapAgrees(t *testing.T) {
	mem, blocks, roots := syntheticHeap(t, 1<<20, 64, 5)
	r, err := Check(Input{Blocks: blocks, Mem: mem, Roots: roots, Heuristics: AllHeuristics})
	if err != nil {
		t.Fatal(err)
	}
	wantC, wantI := refCheck(blocks, mem, roots, AllHeuristics)
	for i := range blocks {
		if r.Class[i] != wantC[i] || r.IndirectBytes[i] != wantI[i] {
			t.Fatalf("block %d: %v/%d, sequential %v/%d", i, r.Class[i], r.IndirectBytes[i], wantC[i], wantI[i])
		}
	}
	tot := r.Totals(blocks)
	if tot.Blocks[Reachable] == 0 || tot.Blocks[Definite] == 0 || tot.Blocks[Indirect] == 0 {
		t.Errorf("the heap should have reachable, definite and indirect blocks: %+v", tot)
	}
	// Through the real system call, on this process's memory.
	pm := OpenProcessMemory(os.Getpid())
	defer pm.Close()
	r2, err := Check(Input{Blocks: blocks, Mem: pm, Roots: roots, Heuristics: AllHeuristics})
	if err != nil {
		t.Fatal(err)
	}
	for i := range blocks {
		if r2.Class[i] != r.Class[i] {
			t.Fatalf("process_vm_readv: block %d: %v, copy %v", i, r2.Class[i], r.Class[i])
		}
	}
	runtime.KeepAlive(mem) // the heap is read by address, not through mem
}
