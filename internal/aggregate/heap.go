package aggregate

// alloc records a new live heap block. A block already live at addr means
// its free was lost; it is released first as if freed, so the counts stay
// consistent with what is live.
func (p *process) alloc(addr, size uint64, callSite siteID, ms uint32) {
	if addr == 0 {
		return // a failed allocation allocated nothing
	}
	stack := callSite.stack
	if p.parts != nil {
		callSite.stack = -1 // a call site; the stack goes to its breakdown
	}
	si := p.siteIndex(callSite, Heap)
	if old, replaced := p.live.insert(addr, liveBlock{size: size, site: si, ms: ms}); replaced {
		p.release(addr, old)
	}
	p.touch(si) // peak.go
	if p.parts != nil {
		p.parts.add(addr, size, si, stack, p.est) // stack_parts.go
	}
	if p.est != nil {
		p.est.alloc(p, si, size) // sampled: weighted estimates (estimate.go)
		return
	}
	s := &p.sites[si].stats
	s.Allocs++
	s.AllocBytes += size
	s.LiveAllocs++
	s.LiveBytes += size
	p.heap.Allocs++
	p.heap.AllocBytes += size
	p.heap.LiveAllocs++
	p.heap.LiveBytes += size
	if p.heap.LiveBytes > p.peakHeap {
		p.peakHeap = p.heap.LiveBytes
	}
}

// free releases the block at addr. The free's own call site is not used:
// the bytes are credited back to the site that allocated them.
func (p *process) free(addr uint64) {
	if addr == 0 {
		return // free(NULL) releases nothing
	}
	b, ok := p.live.remove(addr)
	if !ok {
		p.unmatchedFrees++
		return
	}
	p.release(addr, b)
}

// release accounts for b, at addr, leaving the live set.
func (p *process) release(addr uint64, b liveBlock) {
	p.touch(b.site) // peak.go
	if p.parts != nil {
		p.parts.remove(addr, b.size, p.est)
	}
	if p.est != nil {
		p.est.release(p, b)
		return
	}
	s := &p.sites[b.site].stats
	s.Frees++
	s.FreedBytes += b.size
	s.LiveAllocs--
	s.LiveBytes -= b.size
	p.heap.Frees++
	p.heap.FreedBytes += b.size
	p.heap.LiveAllocs--
	p.heap.LiveBytes -= b.size
}

// realloc applies realloc(oldAddr, size) = addr.
func (p *process) realloc(oldAddr, addr, size uint64, callSite siteID, ms uint32) {
	switch {
	case addr != 0:
		p.free(oldAddr)
		p.alloc(addr, size, callSite, ms)
	case size == 0:
		// realloc(p, 0) returning NULL freed p.
		p.free(oldAddr)
	}
	// Otherwise the call failed and oldAddr stays live.
}

// maxPoolsUnmapped bounds the pools one munmap frees, so that a huge
// munmap costs no more than this many lookups (an arena holds 64).
const maxPoolsUnmapped = 1 << 16

// unmapPools frees the pymalloc pools (event.FuncPyPool) live in
// [start, end): their arena was unmapped. A pool is never freed otherwise
// (the inlined free paths that empty it reach no probe), but for being
// opened again, which alloc takes as the old one's free.
func (p *process) unmapPools(start, end uint64) {
	if p.poolSize == 0 {
		return
	}
	a := (start + p.poolSize - 1) &^ (p.poolSize - 1)
	for n := 0; a < end && a >= start && n < maxPoolsUnmapped; n++ {
		if b, ok := p.live.get(a); ok && b.size == p.poolSize && b.ms&pyBlock != 0 {
			p.free(a)
		}
		a += p.poolSize
	}
}
