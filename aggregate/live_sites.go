package aggregate

// SiteKey identifies a call site as a SiteSnapshot does: the return
// address into the allocator's caller and, in --detail mode, the stack.
type SiteKey struct {
	Address uint64
	StackID int32
}

// Key is the site's identity.
func (s SiteSnapshot) Key() SiteKey { return SiteKey{s.Address, s.StackID} }

// ForEachLiveSite is ForEachLive with each block's whole call site (its
// stack too, in --detail mode), for the leak check's per-site figures.
func (t *Table) ForEachLiveSite(pid uint32, fn func(addr, size uint64, site SiteKey) bool) {
	p := t.procs[pid]
	if p == nil {
		return
	}
	p.live.each(func(addr uint64, b liveBlock) bool {
		s := &p.sites[b.site]
		return fn(addr, b.size, SiteKey{s.addr, s.stack})
	})
}

// ForEachMappedSite is ForEachMapped with each region's call site, for
// access statistics (package access) of mmap'ed memory.
func (t *Table) ForEachMappedSite(pid uint32, fn func(start, end uint64, site SiteKey)) {
	if p := t.procs[pid]; p != nil {
		for _, r := range p.regions.rs {
			s := &p.sites[r.site]
			fn(r.start, r.end, SiteKey{s.addr, s.stack})
		}
	}
}
