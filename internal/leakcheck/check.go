package leakcheck

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Class is what the leak check concluded about a block.
type Class uint8

const (
	// Reachable: a chain of start-pointers (or heuristic interior
	// pointers) leads to it from the roots ("still reachable").
	Reachable Class = iota
	// Possible: it is reached from the roots, but only through an interior
	// pointer somewhere on the way ("possibly lost").
	Possible
	// Indirect: nothing in the roots leads to it, but a lost block points
	// to it ("indirectly lost").
	Indirect
	// Definite: nothing leads to it at all, or it leads a cycle of lost
	// blocks ("definitely lost").
	Definite
)

// Classes lists the classes in the order reports print them.
var Classes = []Class{Definite, Indirect, Possible, Reachable}

func (c Class) String() string {
	switch c {
	case Reachable:
		return "reachable"
	case Possible:
		return "possible"
	case Indirect:
		return "indirect"
	case Definite:
		return "definite"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Title is the class as valgrind's LEAK SUMMARY names it.
func (c Class) Title() string {
	switch c {
	case Reachable:
		return "still reachable"
	case Possible:
		return "possibly lost"
	case Indirect:
		return "indirectly lost"
	case Definite:
		return "definitely lost"
	}
	return c.String()
}

// Kinds is a set of classes, as valgrind's --errors-for-leak-kinds takes it.
type Kinds uint8

// Has reports whether c is in k.
func (k Kinds) Has(c Class) bool { return k&(1<<c) != 0 }

// KindsOf returns the set of the given classes.
func KindsOf(cs ...Class) Kinds {
	var k Kinds
	for _, c := range cs {
		k |= 1 << c
	}
	return k
}

// AllKinds holds every class.
var AllKinds = KindsOf(Definite, Indirect, Possible, Reachable)

// ParseKinds parses "definite,indirect", "all" or "none" (valgrind's
// syntax for --errors-for-leak-kinds).
func ParseKinds(s string) (Kinds, error) {
	switch strings.TrimSpace(s) {
	case "all":
		return AllKinds, nil
	case "none":
		return 0, nil
	}
	var k Kinds
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "definite":
			k |= KindsOf(Definite)
		case "indirect":
			k |= KindsOf(Indirect)
		case "possible":
			k |= KindsOf(Possible)
		case "reachable":
			k |= KindsOf(Reachable)
		default:
			return 0, fmt.Errorf("unknown leak kind %q: use definite, indirect, possible, reachable, all or none", f)
		}
	}
	return k, nil
}

func (k Kinds) String() string {
	switch k {
	case AllKinds:
		return "all"
	case 0:
		return "none"
	}
	var s []string
	for _, c := range Classes {
		if k.Has(c) {
			s = append(s, c.String())
		}
	}
	return strings.Join(s, ",")
}

// Block is a live heap block: the address the allocator returned and the
// size that was asked for.
type Block struct {
	Addr, Size uint64
}

// Input is what a check needs.
type Input struct {
	// Blocks are the live heap blocks, in any order. They must not overlap.
	// Sorted by address (SortByAddr), they are used in place: a big heap's
	// blocks are not copied.
	Blocks []Block
	// Mem reads the stopped target's memory.
	Mem Memory
	// Roots are the ranges of non-heap memory whose words are pointers
	// from a definite place (see Roots).
	Roots []Range
	// Registers are the general-purpose registers of the target's threads.
	Registers []uint64
	// Heuristics are the interior-pointer heuristics that count an
	// interior pointer as a start-pointer (valgrind's default is all).
	Heuristics Heuristics
	// Maps are the target's mappings, sorted by address; the
	// multipleinheritance heuristic needs them to recognize vtables (it
	// never matches without them).
	Maps []Mapping
	// IgnoreInterior, when set, drops interior pointers that are the
	// allocator's bookkeeping rather than the program's (see
	// GlibcChunkHeader). It is given the block and the pointer.
	IgnoreInterior func(mem Memory, b Block, ptr uint64) bool
	// Whole, when set, says which blocks hold objects of their own
	// anywhere in them (pymalloc's pools, where the allocator hides
	// the objects from the probes): every pointer into one is a
	// start-pointer.
	Whole func(b Block) bool
	// BatchBytes bounds the memory read in one go (default 4 MiB).
	BatchBytes int
}

// Result is the class of every block of Input.Blocks.
type Result struct {
	// Class and Heuristic are indexed like Input.Blocks. Heuristic is set
	// for a Reachable block that only a heuristic interior pointer reached.
	Class     []Class
	Heuristic []Heuristic
	// IndirectBytes is, by index in Input.Blocks, for a Definite block
	// the bytes of the blocks indirectly lost through it (its clique);
	// blocks without any have no entry.
	IndirectBytes map[int]uint64
	// ScannedBytes is how much memory was read and scanned (roots and
	// blocks, each read counted); SkippedBytes how much could not be read.
	ScannedBytes, SkippedBytes uint64
}

// Totals are the bytes and blocks of each class.
type Totals struct {
	Bytes, Blocks [4]uint64 // indexed by Class
}

// Add counts one block of class c.
func (t *Totals) Add(c Class, size uint64) {
	t.Bytes[c] += size
	t.Blocks[c]++
}

// Merge adds o to t.
func (t *Totals) Merge(o Totals) {
	for i := range t.Bytes {
		t.Bytes[i] += o.Bytes[i]
		t.Blocks[i] += o.Blocks[i]
	}
}

// Totals sums the classes of in.Blocks.
func (r *Result) Totals(blocks []Block) Totals {
	var t Totals
	for i, b := range blocks {
		t.Add(r.Class[i], b.Size)
	}
	return t
}

// internal states, as memcheck's Reachedness. They are Classes by type
// only, so that the state of a check of sorted blocks turns into its
// result's classes in place (result).
const (
	unreached Class = iota
	indirect
	possible
	reachable
)

// checker holds the blocks sorted by address and their mark state.
type checker struct {
	in  *Input
	blk []Block // sorted by address
	// order maps a sorted index to its index in Input.Blocks; nil when
	// Input.Blocks were sorted already (then blk is Input.Blocks: a big
	// heap is not copied).
	order []int32
	state []Class
	// pending: on the mark stack, a bit per block.
	pending []uint64
	heur    []Heuristic
	// iorc: for an unreached block, the bytes indirectly lost through it
	// (only blocks that lead a clique have an entry).
	iorc  map[int32]uint64
	stack []int32
	index pointerIndex
	rd    reader
	// graph holds the pointers found in the blocks, read once up front.
	graph graph

	scanned, skipped uint64
}

// Check classifies in.Blocks.
func Check(in Input) (*Result, error) {
	if in.Mem == nil {
		return nil, fmt.Errorf("leak check: no memory to read")
	}
	if in.BatchBytes <= 0 {
		in.BatchBytes = 4 << 20
	}
	c := newChecker(&in)
	// Every block is read once, in address order, in big reads (several
	// readers at once where there are cores): the marking then follows
	// the pointers found, not the memory.
	c.buildGraph()
	if err := c.markRoots(); err != nil {
		return nil, err
	}
	c.process(-1)
	// Cliques: each unreached block, in address order, leads the unreached
	// blocks it reaches.
	c.rd.prefetch = true
	for i := range c.blk {
		if c.state[i] != unreached {
			continue
		}
		c.rd.leader = int32(i)
		c.push(int32(i))
		c.process(int32(i))
	}
	return c.result(), nil
}

func newChecker(in *Input) *checker {
	n := len(in.Blocks)
	c := &checker{
		in:      in,
		blk:     in.Blocks,
		state:   make([]Class, n),
		pending: make([]uint64, (n+63)/64),
		heur:    make([]Heuristic, n),
		iorc:    map[int32]uint64{},
	}
	if !slices.IsSortedFunc(in.Blocks, cmpAddr) {
		order := make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int {
			return cmp.Compare(in.Blocks[a].Addr, in.Blocks[b].Addr)
		})
		c.order = order
		c.blk = make([]Block, n)
		for i, o := range order {
			c.blk[i] = in.Blocks[o]
		}
	}
	c.index = newPointerIndex(c.blk)
	c.rd = reader{mem: in.Mem, batch: in.BatchBytes}
	return c
}

func cmpAddr(a, b Block) int { return cmp.Compare(a.Addr, b.Addr) }

func (c *checker) result() *Result {
	n := len(c.blk)
	r := &Result{
		IndirectBytes: map[int]uint64{},
		ScannedBytes:  c.scanned,
		SkippedBytes:  c.skipped,
	}
	if c.order == nil {
		// In place: a big heap's check allocates no more.
		r.Class, r.Heuristic = c.state, c.heur
	} else {
		r.Class, r.Heuristic = make([]Class, n), make([]Heuristic, n)
	}
	for i, st := range c.state {
		o := i
		if c.order != nil {
			o = int(c.order[i])
		}
		h := c.heur[i]
		switch st {
		case reachable:
			r.Class[o] = Reachable
		case possible:
			r.Class[o] = Possible
		case indirect:
			r.Class[o] = Indirect
		default:
			r.Class[o] = Definite
			if b := c.iorc[int32(i)]; b != 0 {
				r.IndirectBytes[o] = b
			}
		}
		if st != reachable {
			h = 0
		}
		r.Heuristic[o] = h
	}
	return r
}

// markRoots scans the roots and registers: pointers from definite places.
func (c *checker) markRoots() error {
	for _, r := range c.in.Roots {
		if err := c.rd.scanRange(r, func(buf []byte, base uint64) {
			c.scanWords(buf, base, -1, true)
		}); err != nil {
			return err
		}
	}
	for _, v := range c.in.Registers {
		c.reach(v, true)
	}
	c.scanned += c.rd.scanned
	c.skipped += c.rd.skipped
	c.rd.scanned, c.rd.skipped = 0, 0
	return nil
}

// push puts block i on the mark stack unless it is there already.
func (c *checker) push(i int32) {
	w, bit := i>>6, uint64(1)<<(i&63)
	if c.pending[w]&bit == 0 {
		c.pending[w] |= bit
		c.stack = append(c.stack, i)
	}
}

// maxPop bounds the blocks taken off the mark stack at a time.
const maxPop = 1 << 18

// process scans the blocks on the mark stack until it is empty: clique -1
// is the mark phase, otherwise the clique of that leader. Blocks are taken
// off the stack in batches, sorted by address: those whose pointers the
// graph holds are scanned from it, the others read.
func (c *checker) process(clique int32) {
	var batch, unread []int32
	for len(c.stack) > 0 {
		batch = batch[:0]
		bytes := 0
		// Many blocks at a time: sorted, close ones are read together.
		for len(c.stack) > 0 && (len(batch) == 0 || bytes < 16*c.in.BatchBytes) && len(batch) < maxPop {
			i := c.stack[len(c.stack)-1]
			c.stack = c.stack[:len(c.stack)-1]
			c.pending[i>>6] &^= 1 << (i & 63)
			batch = append(batch, i)
			if c.graph.part(i) == nil {
				bytes += int(min(c.blk[i].Size, uint64(c.in.BatchBytes)))
			}
		}
		slices.Sort(batch)
		unread = unread[:0]
		for _, i := range batch {
			p := c.graph.part(i)
			if p == nil {
				unread = append(unread, i)
				continue
			}
			// The state decides at scan time whether the block's
			// pointers are definite (memcheck decides it when the block
			// is popped; a block upgraded in between is pushed again, so
			// the fixpoint is the same).
			definite := c.state[i] != possible
			for _, e := range p.edgesOf(i) {
				j, ptr := p.target(&c.index, e)
				if clique < 0 {
					c.reachBlock(j, ptr, definite)
				} else {
					c.gatherBlock(j, ptr, clique)
				}
			}
		}
		if len(unread) > 0 {
			c.rd.readBlocks(c, unread, func(i int32, buf []byte, base uint64) {
				c.scanWords(buf, base, clique, c.state[i] != possible)
			})
		}
	}
	c.scanned += c.rd.scanned
	c.skipped += c.rd.skipped
	c.rd.scanned, c.rd.skipped = 0, 0
}

// scanWords looks at each aligned word of buf (memory at an 8-aligned
// address).
func (c *checker) scanWords(buf []byte, _ uint64, clique int32, definite bool) {
	lo, hi := c.index.lo, c.index.hi
	for off := 0; off+8 <= len(buf); off += 8 {
		v := binary.LittleEndian.Uint64(buf[off:])
		if v < lo || v >= hi {
			continue
		}
		i := c.index.find(v)
		if i < 0 {
			continue
		}
		if clique < 0 {
			c.reachBlock(i, v, definite)
		} else {
			c.gatherBlock(i, v, clique)
		}
	}
}

// reach is reachBlock for a word that may point nowhere.
func (c *checker) reach(ptr uint64, definite bool) {
	if i := c.index.find(ptr); i >= 0 {
		c.reachBlock(i, ptr, definite)
	}
}

// reachBlock is memcheck's lc_push_without_clique_if_a_chunk_ptr: ptr,
// which points into block i, was found in a root (definite) or in a block
// whose state makes it definite or not.
func (c *checker) reachBlock(i int, ptr uint64, definite bool) {
	start := ptr == c.blk[i].Addr || c.in.Whole != nil && c.in.Whole(c.blk[i])
	if c.state[i] == reachable {
		if start {
			c.heur[i] = 0
		}
		return
	}
	if !start && c.in.IgnoreInterior != nil && c.in.IgnoreInterior(c.in.Mem, c.blk[i], ptr) {
		return
	}
	viaStart := start
	if !start && c.in.Heuristics != 0 {
		c.heur[i] = c.heuristic(ptr, i)
		viaStart = c.heur[i] != 0
	}
	switch {
	case viaStart && definite:
		c.state[i] = reachable
		c.push(int32(i))
	case c.state[i] == unreached:
		c.state[i] = possible
		c.push(int32(i))
	}
}

// gatherBlock is memcheck's lc_push_with_clique_if_a_chunk_ptr: an
// unreached block i that ptr, found in the clique, points into joins it.
func (c *checker) gatherBlock(i int, ptr uint64, clique int32) {
	if int32(i) == clique || c.state[i] != unreached {
		return
	}
	if ptr != c.blk[i].Addr && c.in.IgnoreInterior != nil && c.in.IgnoreInterior(c.in.Mem, c.blk[i], ptr) {
		return
	}
	c.push(int32(i))
	c.iorc[clique] += c.blk[i].Size + c.iorc[int32(i)]
	delete(c.iorc, int32(i))
	c.state[i] = indirect
}
