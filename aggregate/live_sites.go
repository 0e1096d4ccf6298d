package aggregate

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
	p := t.procs[pid]
	if p == nil {
		return nil
	}
	var out map[uint64]bool
	p.live.each(func(addr uint64, b liveBlock) bool {
		if b.ms&pyBlock != 0 {
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
