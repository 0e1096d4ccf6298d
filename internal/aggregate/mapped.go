package aggregate

// mmap records a new anonymous mapping [addr, addr+pageRound(size)).
func (p *process) mmap(addr, size uint64, callSite siteID) {
	if addr == 0 || addr == mapFailed || size == 0 {
		return // failed (a zero length is EINVAL)
	}
	end := rangeEnd(addr, size)
	if p.regions.covers(addr, end) {
		// MAP_FIXED inside tracked mappings (the JVM commits and uncommits
		// parts of its reservations so): a replacement, not a new region.
		// The range stays its sites'; its state is read from the kernel.
		return
	}
	// A mapping made over tracked ones in part (MAP_FIXED) replaced them:
	// the kernel unmapped them first, and so does the table.
	p.munmap(addr, end)
	si := p.siteIndex(callSite, Mapped)
	n := end - addr
	p.regions.insert(region{start: addr, end: end, site: si})
	s := &p.sites[si].stats
	s.Allocs++
	s.AllocBytes += n
	s.LiveAllocs++
	s.LiveBytes += n
	p.mapped.Allocs++
	p.mapped.AllocBytes += n
	p.mapped.LiveAllocs++
	p.mapped.LiveBytes += n
	p.notePeakMapped()
}

// munmap removes [start, end) from the tracked regions, crediting the bytes
// back to each region's site. Untracked parts are ignored: they are file
// mappings or the allocator's own, which are not reported as mmaps. The
// process's Frees stay the sum over its sites, so a call that released
// the regions of two sites adds 2 there.
func (p *process) munmap(start, end uint64) {
	p.unmapSeq++
	seq := p.unmapSeq
	p.cut(start, end, func(si uint32, n uint64) {
		st := &p.sites[si]
		st.stats.FreedBytes += n
		p.mapped.FreedBytes += n
		if st.lastUnmap != seq {
			// One Free per call per site, however many regions it touched.
			st.lastUnmap = seq
			st.stats.Frees++
			p.mapped.Frees++
		}
	})
}

// mremap moves or resizes the tracked part of [oldAddr, oldEnd) to
// [addr, newEnd). The result is charged to the first old region's site; a
// resize is not a new mmap call, so only the byte counts move.
func (p *process) mremap(oldAddr, oldSize, addr, size uint64) {
	if addr == 0 || addr == mapFailed || size == 0 {
		return // failed: nothing moved
	}
	oldEnd := rangeEnd(oldAddr, oldSize)
	if i, j := p.regions.overlapping(oldAddr, oldEnd); i == j {
		return // not a mapping we track
	}
	var (
		first     uint32
		haveFirst bool
		kept      uint64 // the first site's bytes that were moved
	)
	p.cut(oldAddr, oldEnd, func(si uint32, n uint64) {
		if !haveFirst {
			first, haveFirst = si, true
		}
		if si == first {
			kept += n
			return
		}
		// Bytes of another site (the kernel merged adjacent mappings) now
		// belong to the first one: for their own site they are gone.
		p.sites[si].stats.FreedBytes += n
		p.mapped.FreedBytes += n
	})
	end := rangeEnd(addr, size)
	p.munmap(addr, end) // whatever the new range replaced (MREMAP_FIXED)
	n := end - addr
	p.regions.insert(region{start: addr, end: end, site: first})
	s := &p.sites[first].stats
	s.LiveAllocs++
	s.LiveBytes += n
	p.mapped.LiveAllocs++
	p.mapped.LiveBytes += n
	if n > kept {
		s.AllocBytes += n - kept
		p.mapped.AllocBytes += n - kept
	} else {
		s.FreedBytes += kept - n
		p.mapped.FreedBytes += kept - n
	}
	p.notePeakMapped()
}

// cut removes [start, end) from the tracked regions, keeping LiveAllocs
// (one per region left) and LiveBytes in step, and calls take with each
// overlapped region's site and the bytes removed from it. What those bytes
// count as, freed or moved, is the caller's business.
func (p *process) cut(start, end uint64, take func(si uint32, n uint64)) {
	i, j := p.regions.overlapping(start, end)
	if i == j {
		return
	}
	var keep [2]region
	k := 0
	for _, r := range p.regions.rs[i:j] {
		if r.start < start {
			keep[k] = region{start: r.start, end: start, site: r.site}
			k++
		}
		if r.end > end {
			keep[k] = region{start: end, end: r.end, site: r.site}
			k++
		}
		n := min(r.end, end) - max(r.start, start)
		s := &p.sites[r.site].stats
		s.LiveAllocs--
		s.LiveBytes -= n
		p.mapped.LiveAllocs--
		p.mapped.LiveBytes -= n
		take(r.site, n)
	}
	for _, r := range keep[:k] {
		p.sites[r.site].stats.LiveAllocs++
		p.mapped.LiveAllocs++
	}
	p.regions.replace(i, j, keep[:k]...)
}

func (p *process) notePeakMapped() {
	if p.mapped.LiveBytes > p.peakMapped {
		p.peakMapped = p.mapped.LiveBytes
	}
}

// ForEachMapped calls fn with each of pid's tracked anonymous mappings
// [start, end) (its mmap calls outside the allocator, less what it
// unmapped), in increasing order: the leak check's roots, where the
// kernel shows one merged with the allocator's.
func (t *Table) ForEachMapped(pid uint32, fn func(start, end uint64)) {
	if p := t.procs[pid]; p != nil {
		for _, r := range p.regions.rs {
			fn(r.start, r.end)
		}
	}
}
