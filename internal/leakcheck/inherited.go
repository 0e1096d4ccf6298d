package leakcheck

import (
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

// Inherited holds, with -f, the blocks forked children inherited from
// their parents: a child starts with its parent's live blocks (same
// addresses, same contents), which are blocks of the child's heap for the
// check until the child frees them or executes a program. The table never
// saw them allocated in the child: its frees of them are unmatched there.
type Inherited struct {
	blocks map[int]map[uint64]InheritedBlock
}

// InheritedBlock is a block a child inherited.
type InheritedBlock struct {
	Size uint64
	Site aggregate.SiteKey
}

// Fork gives child the blocks its parent holds: its live blocks in t and
// those it inherited itself.
func (h *Inherited) Fork(t *aggregate.Table, parent, child int) {
	b := map[uint64]InheritedBlock{}
	t.ForEachLiveSite(uint32(parent), func(addr, size uint64, site aggregate.SiteKey) bool {
		b[addr] = InheritedBlock{size, site}
		return true
	})
	for addr, blk := range h.blocks[parent] {
		b[addr] = blk
	}
	if len(b) == 0 {
		return
	}
	if h.blocks == nil {
		h.blocks = map[int]map[uint64]InheritedBlock{}
	}
	h.blocks[child] = b
}

// Of are the blocks pid inherited and still holds, by address.
func (h *Inherited) Of(pid int) map[uint64]InheritedBlock { return h.blocks[pid] }

// Drop forgets pid's inherited blocks (it executed a program, or was
// checked).
func (h *Inherited) Drop(pid int) { delete(h.blocks, pid) }

// Note keeps pid's inherited blocks in step with an event of it: a block
// freed, or reused by a new allocation, is no longer inherited.
func (h *Inherited) Note(e *event.Event) {
	b := h.blocks[int(e.PID)]
	if b == nil {
		return
	}
	switch e.Kind {
	case event.Free, event.Alloc:
		delete(b, e.Addr)
	case event.Realloc:
		if e.Addr != 0 || e.Size == 0 {
			delete(b, e.OldAddr)
		}
		delete(b, e.Addr)
	}
}
