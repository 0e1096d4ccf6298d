package python

import (
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// TestMemo: a merge is found again under the same words only, a key
// that shares its slot replaces it, and forget empties it.
func TestMemo(t *testing.T) {
	m := newMemo()
	native := []uint64{0x401000, 0x402000}
	py := []uint64{0x7f0000001000, 0x2a}
	key := memoKey(nil, 7, 0, 0x401000, native, py)
	m.put(key, 0x4000000000000002, []uint64{0x4000000000000002, 0x402000})

	tests := []struct {
		name string
		key  []uint64
		want bool
	}{
		{"same words", memoKey(nil, 7, 0, 0x401000, native, py), true},
		{"other pid", memoKey(nil, 8, 0, 0x401000, native, py), false},
		{"other line", memoKey(nil, 7, 0, 0x401000, native, []uint64{0x7f0000001000, 0x2b}), false},
		// The same words after a code object's free may be another's.
		{"code freed since", memoKey(nil, 7, 1, 0x401000, native, py), false},
		// The native stack's length is in the key: a frame moved from
		// native to Python words is another key.
		{"frame moved", memoKey(nil, 7, 0, 0x401000, native[:1], append([]uint64{0x402000}, py...)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			charged, stack, ok := m.get(tt.key)
			if ok != tt.want {
				t.Fatalf("found %v, want %v", ok, tt.want)
			}
			if ok && (charged != 0x4000000000000002 || !slices.Equal(stack, []uint64{0x4000000000000002, 0x402000})) {
				t.Errorf("got %#x %#x", charged, stack)
			}
		})
	}

	// Find another key for the same slot: it evicts the first.
	s := m.slot(key)
	for pid := uint32(100); ; pid++ {
		other := memoKey(nil, pid, 0, 0x401000, native, py)
		if m.slot(other) != s {
			continue
		}
		m.put(other, 1, nil)
		if _, _, ok := m.get(key); ok {
			t.Errorf("the first key survived a put to its slot")
		}
		if c, _, ok := m.get(other); !ok || c != 1 {
			t.Errorf("the second key: %d %v, want 1 true", c, ok)
		}
		break
	}
	m.forget()
	if _, _, ok := m.get(memoKey(nil, 7, 0, 0x401000, native, py)); ok {
		t.Errorf("found after forget")
	}
}

// TestForgetKeepsMemo: forgetting a process that ran no Python (the whole
// host forgets every exited one) keeps the memo; forgetting a Python one
// empties it, since its pid may come back with other code.
func TestForgetKeepsMemo(t *testing.T) {
	s := NewStacks(symbolize.NewResolver())
	s.procs[7] = &Layout{Minor: 12}
	key := memoKey(nil, 7, 0, 0x401000, []uint64{0x401000}, []uint64{0x1000, 0x2a})
	s.memo.put(key, 1, []uint64{1})
	s.Forget(8)
	if _, _, ok := s.memo.get(key); !ok {
		t.Errorf("forgetting a process without Python emptied the memo")
	}
	s.Forget(7)
	if _, _, ok := s.memo.get(key); ok {
		t.Errorf("forgetting the Python process kept its merges")
	}
}

// TestUnnamedCounted: an event whose innermost Python frame cannot be
// named (its process gone before its code objects were read) is counted
// once, whether its stack is kept or not, and Forget returns the count.
func TestUnnamedCounted(t *testing.T) {
	s := NewStacks(symbolize.NewResolver()) // no process to read: every read fails
	s.procs[7] = &Layout{Minor: 12}
	s.eval[7] = map[uint64]bool{}
	shimFirst := []uint64{0x1000, 3 << 48, 0x2000, 0x2a, 0x3000, 0x2b} // the C stack's shim, then two frames
	for _, ev := range []struct {
		native, py []uint64
	}{
		{nil, []uint64{0x2000, 0x2a}},
		{nil, shimFirst},
		{[]uint64{0x401000, 0x402000}, []uint64{0x2000, 0x2a, 0x3000, 0x2b}},
		{[]uint64{0x401000}, shimFirst},
	} {
		out := []uint64(nil)
		if ev.native != nil {
			out = make([]uint64, 0, 8)
		}
		s.Merge(7, 0, ev.native, ev.py, out)
	}
	s.Merge(8, 0, nil, []uint64{0x2000, 0x2a}, nil) // not a Python process: not counted
	if n := s.Forget(8); n != 0 {
		t.Errorf("Forget(8) = %d, want 0", n)
	}
	if n := s.Forget(7); n != 4 {
		t.Errorf("Forget(7) = %d, want 4", n)
	}
	if n := s.Forget(7); n != 0 {
		t.Errorf("Forget(7) again = %d, want 0", n)
	}
}
