package leakcheck

// pointerIndex finds the block a word points into. Blocks are grouped into
// runs of nearby blocks (the main heap, each arena, each mmapped chunk);
// a run spanning few pages per block gets a page table, so that a lookup is
// a run search, a table load and a search among the blocks of one page.
type pointerIndex struct {
	blk []Block // sorted
	// lo and hi bound every block: a quick filter for the many words
	// (small integers, code addresses) that point nowhere near the heap.
	lo, hi uint64
	runs   []run
}

type run struct {
	lo, hi      uint64 // [lo, hi) covers the run's blocks
	first, last int32  // its blocks, sorted indices [first, last)
	// pages[g] is the index of the first block of the run that starts at
	// or after granule g (granules of 1<<shift bytes from base, sized to
	// hold a block or two); nil when the run is too sparse.
	pages []int32
	base  uint64
	shift uint
}

// runGap splits runs: blocks further apart than this start a new run.
const runGap = 1 << 20

// extent is where a block's pointers land: a block of size 0 counts as 1
// byte, as memcheck counts it, so that a pointer to it is seen.
func extent(addr, size uint64) uint64 {
	if size == 0 {
		return addr + 1
	}
	return addr + size
}

func newPointerIndex(blk []Block) pointerIndex {
	x := pointerIndex{blk: blk}
	if len(blk) == 0 {
		return x
	}
	x.lo = blk[0].Addr
	start := 0
	hi := extent(blk[0].Addr, blk[0].Size)
	for i := 1; i <= len(blk); i++ {
		if i < len(blk) && blk[i].Addr < hi+runGap {
			hi = max(hi, extent(blk[i].Addr, blk[i].Size))
			continue
		}
		x.runs = append(x.runs, x.newRun(start, i, hi))
		x.hi = max(x.hi, hi)
		if i < len(blk) {
			start, hi = i, extent(blk[i].Addr, blk[i].Size)
		}
	}
	return x
}

func (x *pointerIndex) newRun(first, last int, hi uint64) run {
	r := run{lo: x.blk[first].Addr, hi: hi, first: int32(first), last: int32(last)}
	n := uint64(last - first)
	// A granule about the size of the average block: a lookup then
	// looks at one or two blocks.
	span := hi - r.lo
	r.shift = 4
	for r.shift < 12 && (uint64(1)<<(r.shift+1))*n <= span {
		r.shift++
	}
	r.base = r.lo &^ (1<<r.shift - 1)
	ngran := (hi-r.base)>>r.shift + 2
	if ngran > 4*n+64 {
		return r // sparse: search the blocks instead
	}
	r.pages = make([]int32, ngran)
	b := first
	for g := range r.pages {
		gstart := r.base + uint64(g)<<r.shift
		for b < last && x.blk[b].Addr < gstart {
			b++
		}
		r.pages[g] = int32(b)
	}
	return r
}

// find returns the sorted index of the block ptr points into, or -1.
func (x *pointerIndex) find(ptr uint64) int {
	if ptr < x.lo || ptr >= x.hi {
		return -1
	}
	// The last run starting at or before ptr.
	rs := x.runs
	l, h := 0, len(rs)
	for l < h {
		m := int(uint(l+h) >> 1)
		if rs[m].lo <= ptr {
			l = m + 1
		} else {
			h = m
		}
	}
	if l == 0 {
		return -1
	}
	r := &rs[l-1]
	if ptr >= r.hi {
		return -1
	}
	// The last block of the run starting at or before ptr, searched among
	// [lo, hi).
	lo, hi := int(r.first), int(r.last)
	if r.pages != nil {
		g := (ptr - r.base) >> r.shift
		// Blocks starting in granule g are [pages[g], pages[g+1]); the one
		// before pages[g] may span into it.
		lo = max(int(r.pages[g])-1, int(r.first))
		hi = int(r.pages[g+1])
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.blk[m].Addr <= ptr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo - 1
	if i < int(r.first) {
		return -1
	}
	if ptr < extent(x.blk[i].Addr, x.blk[i].Size) {
		return i
	}
	return -1
}
