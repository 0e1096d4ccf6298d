package leakcheck

import (
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

// TestInherited: a child gets its parent's live blocks and those the
// parent inherited; its frees, reallocs and new blocks at an inherited
// address take them away; Drop forgets them all.
func TestInherited(t *testing.T) {
	tb := aggregate.NewTable()
	tb.AddProcess(1, "parent")
	for _, a := range []uint64{0x10, 0x20, 0x30} {
		tb.Apply(&event.Event{PID: 1, Kind: event.Alloc, Func: event.FuncMalloc, Addr: a, Size: a, CallSite: 0x401000, StackID: -1})
	}
	var h Inherited
	h.Fork(tb, 1, 2)
	h.Fork(tb, 2, 3) // the grandchild: its parent's inherited blocks
	tb.AddProcess(4, "empty")
	h.Fork(tb, 4, 5) // nothing to inherit
	if len(h.Of(2)) != 3 || len(h.Of(3)) != 3 || h.Of(5) != nil || h.Of(2)[0x20].Size != 0x20 {
		t.Fatalf("inherited: 2 %v, 3 %v, 5 %v", h.Of(2), h.Of(3), h.Of(5))
	}
	h.Note(&event.Event{PID: 2, Kind: event.Free, Addr: 0x10})
	h.Note(&event.Event{PID: 2, Kind: event.Realloc, OldAddr: 0x20, Addr: 0x90, Size: 8})
	h.Note(&event.Event{PID: 3, Kind: event.Realloc, OldAddr: 0x20, Addr: 0, Size: 8}) // failed: 0x20 stays
	if b := h.Of(2); len(b) != 1 || b[0x30].Size != 0x30 {
		t.Errorf("2 after a free and a realloc: %v, want 0x30 alone", b)
	}
	if len(h.Of(3)) != 3 {
		t.Errorf("3 after a failed realloc: %v, want all three", h.Of(3))
	}
	h.Drop(3)
	if h.Of(3) != nil {
		t.Errorf("3 after Drop: %v", h.Of(3))
	}
}
