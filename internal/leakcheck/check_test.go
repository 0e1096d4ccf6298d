package leakcheck

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"
)

// heap builds a fake process: a data segment (root) and heap blocks.
type heap struct {
	mem    *fakeMemory
	data   uint64 // root segment
	blocks []Block
	next   uint64
}

const (
	dataBase = 0x600000
	heapBase = 0x10000000
)

func newHeap() *heap {
	m := &fakeMemory{}
	m.region(dataBase, 4096)
	return &heap{mem: m, data: dataBase, next: heapBase}
}

// alloc adds a block of size n (with a 16-byte gap before it, as a chunk
// header would leave) and returns its address.
func (h *heap) alloc(n uint64) uint64 {
	h.next += 16
	a := h.next
	h.mem.region(a, int((max(n, 8)+15)&^15))
	h.blocks = append(h.blocks, Block{a, n})
	h.next += (max(n, 8) + 15) &^ 15
	return a
}

// global stores v in the root segment's slot i.
func (h *heap) global(i int, v uint64) { h.mem.put(h.data+uint64(8*i), v) }

func (h *heap) check(t *testing.T, mut ...func(*Input)) *Result {
	t.Helper()
	in := Input{Blocks: h.blocks, Mem: h.mem, Roots: []Range{{h.data, h.data + 4096}}, Heuristics: AllHeuristics}
	for _, f := range mut {
		f(&in)
	}
	r, err := Check(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantClasses(t *testing.T, r *Result, want ...Class) {
	t.Helper()
	if !slices.Equal(r.Class, want) {
		t.Errorf("classes %v, want %v", r.Class, want)
	}
}

func TestDroppedPointer(t *testing.T) {
	h := newHeap()
	h.alloc(100)
	r := h.check(t)
	wantClasses(t, r, Definite)
	if tot := r.Totals(h.blocks); tot.Bytes[Definite] != 100 || tot.Blocks[Definite] != 1 {
		t.Errorf("totals %+v", tot)
	}
}

func TestLostList(t *testing.T) {
	for _, reversed := range []bool{false, true} {
		h := newHeap()
		nodes := make([]uint64, 5)
		for i := range nodes {
			nodes[i] = h.alloc(32)
		}
		if reversed {
			slices.Reverse(nodes) // head at the highest address
		}
		for i := 0; i+1 < len(nodes); i++ {
			h.mem.put(nodes[i], nodes[i+1])
		}
		r := h.check(t)
		head := slices.Index(h.blocksAddrs(), nodes[0])
		for i, c := range r.Class {
			want := Indirect
			if i == head {
				want = Definite
			}
			if c != want {
				t.Errorf("reversed=%v block %d: %v, want %v", reversed, i, c, want)
			}
		}
		if r.IndirectBytes[head] != 4*32 {
			t.Errorf("reversed=%v: head's indirect bytes %d, want 128", reversed, r.IndirectBytes[head])
		}
	}
}

func (h *heap) blocksAddrs() []uint64 {
	var a []uint64
	for _, b := range h.blocks {
		a = append(a, b.Addr)
	}
	return a
}

func TestLostCycle(t *testing.T) {
	h := newHeap()
	a, b := h.alloc(16), h.alloc(16)
	h.mem.put(a, b)
	h.mem.put(b, a)
	wantClasses(t, h.check(t), Definite, Indirect)
}

func TestInteriorPointerIsPossible(t *testing.T) {
	h := newHeap()
	a := h.alloc(64)
	b := h.alloc(40)
	h.mem.put(a+32, b) // a possibly-lost block's children are possibly lost
	h.global(0, a+16)
	wantClasses(t, h.check(t), Possible, Possible)
}

// TestWholeBlock: a pymalloc pool holds objects anywhere in it, so an
// interior pointer to one is a start-pointer (Input.Whole), and what the
// pool points to is reachable, not possibly lost.
func TestWholeBlock(t *testing.T) {
	h := newHeap()
	pool := h.alloc(16 << 10)
	buf := h.alloc(4096)
	h.mem.put(pool+48+8, buf) // an object's buffer pointer
	h.global(0, pool+48)      // a pointer to the object
	wantClasses(t, h.check(t), Possible, Possible)
	whole := func(in *Input) { in.Whole = func(b Block) bool { return b.Addr == pool } }
	wantClasses(t, h.check(t, whole), Reachable, Reachable)
}

func TestReachableChain(t *testing.T) {
	h := newHeap()
	a, b, c := h.alloc(24), h.alloc(24), h.alloc(24)
	h.mem.put(a, b)
	h.mem.put(b+8, c+8) // interior from a reachable block: possible
	h.global(3, a)
	wantClasses(t, h.check(t), Reachable, Reachable, Possible)
}

func TestUpgradePossibleToReachable(t *testing.T) {
	h := newHeap()
	x, y, z := h.alloc(64), h.alloc(64), h.alloc(64)
	h.mem.put(x+8, y+16) // x -> interior of y (y possible so far)
	h.mem.put(y, z)      // y -> z
	h.mem.put(x, y)      // x -> start of y: y reachable, so z too
	h.global(0, x+32)    // x itself only through an interior pointer
	h.global(1, x)       // ... and a start pointer
	wantClasses(t, h.check(t), Reachable, Reachable, Reachable)
}

func TestRegistersAreRoots(t *testing.T) {
	h := newHeap()
	a := h.alloc(8)
	b := h.alloc(8)
	r := h.check(t, func(in *Input) { in.Registers = []uint64{0, a, b + 4} })
	wantClasses(t, r, Reachable, Possible)
}

func TestZeroSizeAndOnePastEnd(t *testing.T) {
	h := newHeap()
	a := h.alloc(0)
	b := h.alloc(16)
	h.global(0, a)
	h.global(1, b+16) // one past the end reaches nothing
	wantClasses(t, h.check(t), Reachable, Definite)
}

func TestUnalignedTailNotScanned(t *testing.T) {
	h := newHeap()
	a := h.alloc(12) // one whole word only
	b := h.alloc(8)
	h.mem.put(a+8-8, 0)
	// Put b's address in bytes 8..16 of a: past a's 12 bytes' last whole word.
	h.mem.put(a+8, b)
	h.global(0, a)
	wantClasses(t, h.check(t), Reachable, Definite)
}

func TestHeuristics(t *testing.T) {
	tests := []struct {
		name  string
		size  uint64
		words map[uint64]uint64 // offset -> value
		off   uint64
		want  Heuristic
	}{
		{"length64", 48, map[uint64]uint64{0: 40}, 8, Length64},
		{"newarray", 8 + 3*16, map[uint64]uint64{0: 3}, 8, NewArray},
		{"newarray bad count", 8 + 3*16, map[uint64]uint64{0: 5}, 8, 0},
		{"stdstring", 24 + 10 + 1, map[uint64]uint64{0: 7, 8: 10}, 24, StdString},
		{"stdstring too long", 24 + 10 + 1, map[uint64]uint64{0: 11, 8: 10}, 24, 0},
		{"plain interior", 64, nil, 16, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeap()
			a := h.alloc(tt.size)
			for o, v := range tt.words {
				h.mem.put(a+o, v)
			}
			h.global(0, a+tt.off)
			r := h.check(t)
			want := Possible
			if tt.want != 0 {
				want = Reachable
			}
			wantClasses(t, r, want)
			if r.Heuristic[0] != tt.want {
				t.Errorf("heuristic %v, want %v", r.Heuristic[0], tt.want)
			}
			if tt.want != 0 {
				off := h.check(t, func(in *Input) { in.Heuristics = 0 })
				wantClasses(t, off, Possible)
			}
		})
	}
}

func TestMultipleInheritance(t *testing.T) {
	h := newHeap()
	// Code at 0x400000 (r-x file), vtables at 0x500000 (r-- file).
	h.mem.region(0x500000, 4096)
	vtA, vtB := uint64(0x500010), uint64(0x500100)
	for i := uint64(0); i < 3; i++ {
		h.mem.put(vtA+8*i, 0x401000+16*i)
		h.mem.put(vtB+8*i, 0x402000+16*i)
	}
	maps := []Mapping{
		{Start: 0x400000, End: 0x401000 + 0x10000, Perms: "r-xp", Inode: 1, Path: "/bin/x"},
		{Start: 0x500000, End: 0x501000, Perms: "r--p", Inode: 1, Path: "/bin/x"},
		{Start: dataBase, End: dataBase + 4096, Perms: "rw-p", Inode: 1, Path: "/bin/x"},
	}
	obj := h.alloc(32)
	h.mem.put(obj, vtA)
	h.mem.put(obj+16, vtB)
	h.global(0, obj+16)
	r := h.check(t, func(in *Input) { in.Maps = maps })
	wantClasses(t, r, Reachable)
	if r.Heuristic[0] != MultipleInheritance {
		t.Errorf("heuristic %v", r.Heuristic[0])
	}
	// Without the mappings vtables cannot be recognized.
	wantClasses(t, h.check(t), Possible)
	// A "vtable" whose entries point at data is not one.
	h.mem.put(vtB, dataBase)
	wantClasses(t, h.check(t, func(in *Input) { in.Maps = maps }), Possible)
}

func TestUnreadableRootPageSkipped(t *testing.T) {
	h := newHeap()
	a := h.alloc(8)
	h.mem.region(0x700000, 4096)
	h.mem.put(0x700000+8, a)
	// Root range covers an unmapped page before the readable one.
	r := h.check(t, func(in *Input) { in.Roots = []Range{{0x6ff000, 0x701000}} })
	wantClasses(t, r, Reachable)
	if r.SkippedBytes != 4096 {
		t.Errorf("skipped %d, want 4096", r.SkippedBytes)
	}
}

func TestGlibcChunkHeader(t *testing.T) {
	h := newHeap()
	// A 24-byte block in a 32-byte chunk: its last word is the next
	// chunk's prev_size, so the next chunk's header is inside it.
	a := h.alloc(24)
	h.mem.region(a-16, 16) // the chunk header
	h.mem.put(a-8, 32|1)   // size 32, PREV_INUSE
	h.global(0, a+16)      // main_arena.top -> next chunk header
	wantClasses(t, h.check(t), Possible)
	r := h.check(t, func(in *Input) { in.IgnoreInterior = GlibcChunkHeader })
	wantClasses(t, r, Definite)
	// A program's own interior pointer elsewhere still counts.
	h.global(1, a+8)
	wantClasses(t, h.check(t, func(in *Input) { in.IgnoreInterior = GlibcChunkHeader }), Possible)
}

// refCheck is memcheck's algorithm as written, one block at a time, for
// comparing with Check's batches.
func refCheck(blocks []Block, mem Memory, roots []Range, heur Heuristics) ([]Class, map[int]uint64) {
	in := &Input{Blocks: blocks, Mem: mem, Heuristics: heur, BatchBytes: 1 << 20}
	c := newChecker(in)
	word := func(a uint64) uint64 { v, _ := c.word(a); return v }
	var scan func(i int, clique int)
	var stack []int
	pending := make([]bool, len(blocks))
	push := func(i int) {
		if !pending[i] {
			pending[i] = true
			stack = append(stack, i)
		}
	}
	reach := func(p uint64, definite bool) {
		i := c.index.find(p)
		if i < 0 {
			return
		}
		if c.state[i] == reachable {
			return
		}
		via := p == c.blk[i].Addr
		if !via && heur != 0 {
			via = c.heuristic(p, i) != 0
		}
		if via && definite {
			c.state[i] = reachable
			push(i)
		} else if c.state[i] == unreached {
			c.state[i] = possible
			push(i)
		}
	}
	gather := func(p uint64, clique int) {
		i := c.index.find(p)
		if i < 0 || i == clique || c.state[i] != unreached {
			return
		}
		push(i)
		c.iorc[int32(clique)] += c.blk[i].Size + c.iorc[int32(i)]
		delete(c.iorc, int32(i))
		c.state[i] = indirect
	}
	scan = func(i int, clique int) {
		s, e := wordSpan(c.blk[i].Addr, c.blk[i].Size)
		definite := c.state[i] != possible
		for a := s; a < e; a += 8 {
			if clique < 0 {
				reach(word(a), definite)
			} else {
				gather(word(a), clique)
			}
		}
	}
	drain := func(clique int) {
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			pending[i] = false
			scan(i, clique)
		}
	}
	for _, r := range roots {
		for a := r.Start; a < r.End; a += 8 {
			reach(word(a), true)
		}
	}
	drain(-1)
	for i := range c.blk {
		if c.state[i] == unreached {
			push(i)
			drain(i)
		}
	}
	res := c.result()
	return res.Class, res.IndirectBytes
}

// graphSettings are the ways Check can read a heap: its pointers all
// kept (the default budget), some or none; by one reader or by several.
type graphSetting struct {
	name   string
	budget int
	fork   bool
}

var graphSettings = []graphSetting{
	{"whole graph", 64 << 20, false},
	{"64-byte graph", 64, false},
	{"no graph", 0, false},
	{"whole graph, 3 readers", 64 << 20, true},
	{"64-byte graph, 3 readers", 192, true},
}

// withGraph runs check with graph setting g.
func withGraph(g graphSetting, check func() (*Result, error)) (*Result, error) {
	defer func(b, m int) { graphBudget, minPartBlocks = b, m }(graphBudget, minPartBlocks)
	graphBudget, minPartBlocks = g.budget, 1
	if g.fork && runtime.GOMAXPROCS(0) < 3 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	}
	return check()
}

// TestBatchesAgreeWithSequential builds random pointer graphs and checks
// that Check, whatever its batch size, classifies as memcheck's sequential
// algorithm does.
func TestBatchesAgreeWithSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		h := newHeap()
		n := 1 + rng.IntN(60)
		for i := 0; i < n; i++ {
			sz := uint64(rng.IntN(9)) * 8
			if rng.IntN(5) == 0 {
				sz = uint64(rng.IntN(200))
			}
			h.alloc(sz)
		}
		addrs := h.blocksAddrs()
		// Random pointers: start, interior, heuristic-looking.
		edges := rng.IntN(3 * n)
		for e := 0; e < edges; e++ {
			from := h.blocks[rng.IntN(n)]
			if from.Size < 8 {
				continue
			}
			to := h.blocks[rng.IntN(n)]
			p := to.Addr
			if rng.IntN(4) == 0 && to.Size > 8 {
				p += uint64(rng.IntN(int(to.Size)))
			}
			off := uint64(rng.IntN(int(from.Size/8))) * 8
			h.mem.put(from.Addr+off, p)
		}
		for g := 0; g < rng.IntN(4); g++ {
			to := addrs[rng.IntN(n)]
			if rng.IntN(3) == 0 {
				to += 8
			}
			h.global(g, to)
		}
		roots := []Range{{h.data, h.data + 4096}}
		wantC, wantI := refCheck(h.blocks, h.mem, roots, AllHeuristics)
		for _, bb := range []int{8, 64, 1 << 20} {
			// The graph of every block, of some (a budget of 64 bytes) or
			// of none; with one reader or several.
			for _, g := range graphSettings {
				// Shuffle the input: the order must not matter either.
				perm := rng.Perm(n)
				blocks := make([]Block, n)
				for i, p := range perm {
					blocks[i] = h.blocks[p]
				}
				var mem Memory = &batchFake{fakeMemory: h.mem}
				if g.fork {
					mem = &forkFake{batchFake: mem.(*batchFake)}
				}
				r, err := withGraph(g, func() (*Result, error) {
					return Check(Input{Blocks: blocks, Mem: mem, Roots: roots, Heuristics: AllHeuristics, BatchBytes: bb})
				})
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range perm {
					if r.Class[i] != wantC[p] || r.IndirectBytes[i] != wantI[p] {
						t.Fatalf("iter %d batch %d %s: block %#x: %v/%d, sequential says %v/%d",
							iter, bb, g.name, blocks[i].Addr, r.Class[i], r.IndirectBytes[i], wantC[p], wantI[p])
					}
				}
			}
		}
	}
}

func TestPointerIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var addrs, sizes []uint64
	a := uint64(0x1000)
	for i := 0; i < 5000; i++ {
		gap := uint64(rng.IntN(64)) * 16
		if rng.IntN(500) == 0 {
			gap = 1 << 30 // a new run, far away
		}
		a += gap
		s := uint64(rng.IntN(300))
		if rng.IntN(200) == 0 {
			s = 1 << 16
		}
		addrs = append(addrs, a)
		sizes = append(sizes, s)
		a += max(s, 1)
	}
	blk := make([]Block, len(addrs))
	for i := range addrs {
		blk[i] = Block{addrs[i], sizes[i]}
	}
	x := newPointerIndex(blk)
	naive := func(p uint64) int {
		i := sort.Search(len(addrs), func(i int) bool { return addrs[i] > p }) - 1
		if i >= 0 && p < extent(addrs[i], sizes[i]) {
			return i
		}
		return -1
	}
	for k := 0; k < 200000; k++ {
		i := rng.IntN(len(addrs))
		p := addrs[i] + uint64(rng.IntN(int(sizes[i])+40)) - 20
		if got, want := x.find(p), naive(p); got != want {
			t.Fatalf("find(%#x) = %d, want %d", p, got, want)
		}
	}
	if x.find(0) != -1 || x.find(^uint64(0)) != -1 {
		t.Error("out of range pointers found blocks")
	}
}

func TestBatchReadsAreFew(t *testing.T) {
	h := newHeap()
	const n = 10000
	prev := uint64(0)
	for i := 0; i < n; i++ {
		a := h.alloc(64)
		if prev != 0 {
			h.mem.put(a, prev)
		}
		prev = a
	}
	h.global(0, prev)
	bm := &batchFake{fakeMemory: h.mem}
	r, err := Check(Input{Blocks: h.blocks, Mem: bm, Roots: []Range{{h.data, h.data + 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	if tot := r.Totals(h.blocks); tot.Blocks[Reachable] != n {
		t.Fatalf("totals %+v", tot)
	}
	// A chain is found one block at a time; the lost ones are read ahead.
	if bm.batches > n+10 {
		t.Errorf("%d batch reads for %d blocks", bm.batches, n)
	}
	// Lost blocks in the clique phase are read ahead in batches.
	h2 := newHeap()
	for i := 0; i < n; i++ {
		h2.alloc(64)
	}
	bm2 := &batchFake{fakeMemory: h2.mem}
	if _, err := Check(Input{Blocks: h2.blocks, Mem: bm2, Roots: []Range{{h2.data, h2.data + 4096}}}); err != nil {
		t.Fatal(err)
	}
	if bm2.batches > n/1024+5 {
		t.Errorf("%d batch reads for %d lost blocks, want about %d", bm2.batches, n, n/1024+1)
	}
}

func TestWordSpan(t *testing.T) {
	for _, tt := range []struct{ addr, size, s, e uint64 }{
		{16, 12, 16, 24}, {17, 20, 24, 32}, {16, 0, 16, 16}, {16, 7, 16, 16},
	} {
		s, e := wordSpan(tt.addr, tt.size)
		if s != tt.s || e != tt.e {
			t.Errorf("wordSpan(%d,%d) = %d,%d want %d,%d", tt.addr, tt.size, s, e, tt.s, tt.e)
		}
	}
}

var _ = binary.LittleEndian

// TestPartlyUnreadableBlock: a block whose second page cannot be read is
// scanned as far as it can be, and the blocks read in the same batch are
// scanned whole.
func TestPartlyUnreadableBlock(t *testing.T) {
	m := &fakeMemory{}
	m.region(dataBase, 4096)
	big := uint64(0x20000000)
	m.region(big, 4096) // of its 8192 bytes, only the first page
	small := uint64(0x20100000)
	m.region(small, 16)
	b, d := uint64(0x20200000), uint64(0x20300000)
	m.region(b, 16)
	m.region(d, 16)
	m.put(big+8, b)
	m.put(small, d)
	m.put(dataBase, big)
	m.put(dataBase+8, small)
	blocks := []Block{{big, 8192}, {small, 16}, {b, 16}, {d, 16}}
	for _, bb := range []int{1 << 20, 4096} {
		r, err := Check(Input{Blocks: blocks, Mem: &batchFake{fakeMemory: m}, Roots: []Range{{dataBase, dataBase + 4096}}, BatchBytes: bb})
		if err != nil {
			t.Fatal(err)
		}
		wantClasses(t, r, Reachable, Reachable, Reachable, Reachable)
		if r.SkippedBytes != 4096 {
			t.Errorf("batch %d: skipped %d, want 4096", bb, r.SkippedBytes)
		}
	}
}

// TestScatteredCliqueReads: a lost tree whose blocks are scattered over the
// heap is read about once, not one read-ahead window per block. (Cliques
// are gathered level by level from leaders in address order, so the reads
// are many small batches: the order is memcheck's, and it decides which
// blocks are definitely lost.)
func TestScatteredCliqueReads(t *testing.T) {
	h := newHeap()
	const n = 20000
	for i := 0; i < n; i++ {
		h.alloc(64)
	}
	perm := rand.New(rand.NewPCG(5, 6)).Perm(n)
	for k := 1; k < n; k++ {
		h.mem.put(h.blocks[perm[(k-1)/2]].Addr+uint64((k-1)%2)*8, h.blocks[perm[k]].Addr)
	}
	bm := &batchFake{fakeMemory: h.mem}
	r, err := Check(Input{Blocks: h.blocks, Mem: bm, Roots: []Range{{h.data, h.data + 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	if tot := r.Totals(h.blocks); tot.Blocks[Definite] != 1 || tot.Blocks[Indirect] != n-1 {
		t.Fatalf("totals %+v", tot)
	}
	if bm.bytes > 16*64*n { // gaps between close blocks are read too
		t.Errorf("read %d bytes for a lost tree of %d bytes", bm.bytes, 64*n)
	}
}
