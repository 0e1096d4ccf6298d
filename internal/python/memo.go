package python

import "slices"

// memo remembers the last merges, so that an event whose native and
// Python frames repeat an earlier one costs a hash and a compare instead
// of a name lookup per frame: a loop allocating on one line sends the
// same stack again and again. It is direct-mapped: a key evicts whatever
// shared its slot. Not safe for concurrent use.
type memo struct {
	slots []memoSlot
}

// memoSlots is the memo's size: a few MiB at most, with the deep stacks
// of a Python program.
const memoSlots = 4096

type memoSlot struct {
	key     []uint64 // memoKey's words; nil: empty
	charged uint64
	stack   []uint64
}

func newMemo() *memo { return &memo{slots: make([]memoSlot, memoSlots)} }

// memoKey appends the words that decide a merge to key: pid, its code
// objects freed so far (Stacks.CodeFreed), the native call site, the
// native stack's length, its frames, and the Python words.
func memoKey(key []uint64, pid uint32, freed, callSite uint64, native, py []uint64) []uint64 {
	key = append(key[:0], uint64(pid), freed, callSite, uint64(len(native)))
	key = append(key, native...)
	return append(key, py...)
}

// slot is key's slot.
func (m *memo) slot(key []uint64) *memoSlot {
	// FNV-1a over words: the frames differ in their low bits.
	h := uint64(14695981039346656037)
	for _, w := range key {
		h = (h ^ w) * 1099511628211
	}
	h ^= h >> 29
	return &m.slots[h%memoSlots]
}

// get returns the merge remembered for key.
func (m *memo) get(key []uint64) (charged uint64, stack []uint64, ok bool) {
	s := m.slot(key)
	if s.key == nil || !slices.Equal(s.key, key) {
		return 0, nil, false
	}
	return s.charged, s.stack, true
}

// put remembers a merge, reusing the slot's buffers.
func (m *memo) put(key []uint64, charged uint64, stack []uint64) {
	s := m.slot(key)
	s.key = append(s.key[:0], key...)
	s.charged = charged
	s.stack = append(s.stack[:0], stack...)
}

// forget empties the memo (a process gone or exec'd: its pid may return
// with other code).
func (m *memo) forget() {
	for i := range m.slots {
		m.slots[i] = memoSlot{}
	}
}
