package aggregate

import (
	"cmp"
	"slices"
)

// SiteKey identifies a call site as a SiteSnapshot does: the return
// address into the allocator's caller and, in --detail mode, the stack.
type SiteKey struct {
	Address uint64
	StackID int32
}

// Key is the site's identity.
func (s SiteSnapshot) Key() SiteKey { return SiteKey{s.Address, s.StackID} }

// PythonBlocks returns the addresses of pid's live pymalloc blocks (nil
// when it has none): the leak check scans them, for the pointers they hold,
// but does not judge them, since Python's garbage collector owns them.
func (t *Table) PythonBlocks(pid uint32) map[uint64]bool {
	return t.pythonBlocks(pid, 0)
}

// PythonPools is the set of pid's live pymalloc pools (event.FuncPyPool),
// whose objects the probes do not see one by one: a pointer anywhere in
// one may be an object's start.
func (t *Table) PythonPools(pid uint32) map[uint64]bool {
	p := t.procs[pid]
	if p == nil || p.poolSize == 0 {
		return nil
	}
	return t.pythonBlocks(pid, p.poolSize)
}

// pythonBlocks returns the addresses of pid's live pymalloc blocks of
// size bytes (any size: 0), or nil when there are none.
func (t *Table) pythonBlocks(pid uint32, size uint64) map[uint64]bool {
	p := t.procs[pid]
	if p == nil {
		return nil
	}
	var out map[uint64]bool
	p.live.each(func(addr uint64, b liveBlock) bool {
		if b.ms&pyBlock != 0 && (size == 0 || b.size == size) {
			if out == nil {
				out = map[uint64]bool{}
			}
			out[addr] = true
		}
		return true
	})
	return out
}

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

// TopSiteAddresses returns the distinct call-site addresses of pid's n
// sites holding the most live bytes, most first: what a report names
// first, without a snapshot of the whole process.
func (t *Table) TopSiteAddresses(pid uint32, n int) []uint64 {
	p := t.procs[pid]
	if p == nil || n <= 0 {
		return nil
	}
	order := make([]int, len(p.sites))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(p.sites[b].stats.LiveBytes, p.sites[a].stats.LiveBytes)
	})
	var out []uint64
	for _, i := range order {
		if len(out) == n {
			break
		}
		if a := p.sites[i].addr; a != 0 && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// LiveCount is how many blocks pid holds live.
func (t *Table) LiveCount(pid uint32) int {
	if p := t.procs[pid]; p != nil {
		return p.live.len()
	}
	return 0
}

// LiveSite is the call site of pid's live block at addr, if there is one:
// the leak check keeps blocks by address alone, and finds their sites
// again when it reports them.
func (t *Table) LiveSite(pid uint32, addr uint64) (SiteKey, bool) {
	i, ok := t.LiveSiteIndex(pid, addr)
	if !ok {
		return SiteKey{}, false
	}
	return t.SiteKeyAt(pid, i), true
}

// LiveSiteIndex is LiveSite as an index for SiteKeyAt: 4 bytes a block
// for a caller that keeps the sites of millions. Concurrent calls are
// safe while the table is not changed.
func (t *Table) LiveSiteIndex(pid uint32, addr uint64) (uint32, bool) {
	p := t.procs[pid]
	if p == nil {
		return 0, false
	}
	b, ok := p.live.get(addr)
	return b.site, ok
}

// SiteKeyAt is the call site of LiveSiteIndex's index i in pid.
func (t *Table) SiteKeyAt(pid uint32, i uint32) SiteKey {
	s := &t.procs[pid].sites[i]
	return SiteKey{s.addr, s.stack}
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
