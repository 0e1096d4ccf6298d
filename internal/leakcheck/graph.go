package leakcheck

import (
	"encoding/binary"
	"io"
	"runtime"
	"sync"
)

// graph holds the words of the blocks that point into blocks, found by
// reading every block once, in address order, in big reads (the blocks
// split between a few readers where there are cores). The mark and
// clique phases then follow these edges instead of reading the target
// again: a chain of blocks would otherwise cost a read per block, and a
// system call per read. A heap with more pointers than the budget keeps
// the edges of its first blocks only; the others are read when scanned.
type graph struct {
	parts []graphPart
}

// graphPart is the edges of the blocks [lo, hi) (sorted indices).
type graphPart struct {
	lo, hi int32
	// off: the edges of block lo+k are edges[off[k]:off[k+1]].
	off []uint32
	// edges are, in the order of the words in the block, a block's index
	// for a pointer to its start, or interiorEdge|k for the interior
	// pointer interior[k].
	edges    []uint32
	interior []uint64
	// scanned and skipped count the bytes read and not readable.
	scanned, skipped uint64
}

// interiorEdge marks an edge that is an interior pointer.
const interiorEdge = 1 << 31

// graphBudget bounds the bytes of edges kept (64 MiB: 16 million
// pointers; a variable for the tests).
var graphBudget = 64 << 20

// graphStep is how many blocks a reader hands readBlocks at a time; the
// budget is checked between steps.
const graphStep = 1 << 14

// maxReaders bounds the readers that build the graph at once.
const maxReaders = 8

// minPartBlocks: a heap of fewer blocks than this per reader is not worth
// another reader (a variable for the tests).
var minPartBlocks = 1 << 14

// ForkMemory is a Memory that gives other readers of the same memory, for
// other goroutines: Check then reads the blocks with several at once.
type ForkMemory interface {
	Memory
	// Fork returns a reader for another goroutine; Check closes it if it
	// is an io.Closer.
	Fork() Memory
}

// part returns the part that holds block i's edges, or nil.
func (g *graph) part(i int32) *graphPart {
	for k := range g.parts {
		if p := &g.parts[k]; i >= p.lo && i < p.hi {
			return p
		}
	}
	return nil
}

// edgesOf are block i's edges (i in [p.lo, p.hi)).
func (p *graphPart) edgesOf(i int32) []uint32 {
	k := i - p.lo
	return p.edges[p.off[k]:p.off[k+1]]
}

// target is the block an edge points into, and the pointer.
func (p *graphPart) target(x *pointerIndex, e uint32) (int, uint64) {
	if e&interiorEdge == 0 {
		return int(e), x.blk[e].Addr
	}
	ptr := p.interior[e&^interiorEdge]
	return x.find(ptr), ptr
}

// buildGraph reads every block and keeps its edges, within the budget.
func (c *checker) buildGraph() {
	n := len(c.blk)
	if n == 0 {
		return
	}
	readers := 1
	fm, ok := c.in.Mem.(ForkMemory)
	if ok {
		readers = max(1, min(runtime.GOMAXPROCS(0), maxReaders, n/minPartBlocks))
	}
	// Parts of about equal bytes.
	var total uint64
	for _, b := range c.blk {
		total += b.Size
	}
	bounds := make([]int32, 0, readers+1)
	bounds = append(bounds, 0)
	var acc uint64
	for i, b := range c.blk {
		acc += b.Size
		if len(bounds) < readers && acc >= total/uint64(readers)*uint64(len(bounds)) {
			bounds = append(bounds, int32(i+1))
		}
	}
	bounds = append(bounds, int32(n))
	parts := make([]graphPart, len(bounds)-1)
	budget := graphBudget / len(parts)
	var wg sync.WaitGroup
	for k := range parts {
		mem := c.in.Mem
		if k > 0 {
			mem = fm.Fork()
		}
		build := func() {
			rd := reader{mem: mem, batch: c.in.BatchBytes}
			parts[k] = c.buildPart(&rd, bounds[k], bounds[k+1], budget)
			if cl, ok := mem.(io.Closer); ok && k > 0 {
				cl.Close()
			}
		}
		if k == len(parts)-1 {
			build() // the last on this goroutine
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			build()
		}()
	}
	wg.Wait()
	for _, p := range parts {
		c.scanned += p.scanned
		c.skipped += p.skipped
	}
	c.graph.parts = parts
}

// buildPart reads the blocks [lo, hi) until the part's edges reach budget
// bytes.
func (c *checker) buildPart(rd *reader, lo, hi int32, budget int) graphPart {
	p := graphPart{lo: lo, hi: lo, off: make([]uint32, 1, hi-lo+1)}
	// Room for a pointer a block, within the budget: appends that double
	// a big slice leave as much garbage as they keep.
	p.edges = make([]uint32, 0, min(int(hi-lo), budget/4))
	idx := make([]int32, 0, graphStep)
	x := &c.index
	for next := lo; next < hi && len(p.edges)*4+len(p.interior)*8 < budget; {
		end := min(hi, next+graphStep)
		idx = idx[:0]
		for i := next; i < end; i++ {
			idx = append(idx, i)
		}
		rd.readBlocks(c, idx, func(i int32, buf []byte, _ uint64) {
			for p.hi < i { // close the blocks before i
				p.off = append(p.off, uint32(len(p.edges)))
				p.hi++
			}
			p.scan(x, buf)
		})
		for p.hi < end {
			p.off = append(p.off, uint32(len(p.edges)))
			p.hi++
		}
		next = end
	}
	p.scanned, p.skipped = rd.scanned, rd.skipped
	return p
}

// scan keeps the words of buf (a block's, or a part of it) that point
// into a block.
func (p *graphPart) scan(x *pointerIndex, buf []byte) {
	lo, hi := x.lo, x.hi
	for off := 0; off+8 <= len(buf); off += 8 {
		v := binary.LittleEndian.Uint64(buf[off:])
		if v < lo || v >= hi {
			continue
		}
		j := x.find(v)
		if j < 0 {
			continue
		}
		if v == x.blk[j].Addr {
			p.edges = append(p.edges, uint32(j))
			continue
		}
		p.edges = append(p.edges, interiorEdge|uint32(len(p.interior)))
		p.interior = append(p.interior, v)
	}
}
