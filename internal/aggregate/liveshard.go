package aggregate

import "math/bits"

// liveShard is one open-addressing table holding the keys whose hashes
// start with the same depth bits.
type liveShard struct {
	slots []liveSlot
	count int
	depth uint
}

// newShard returns a shard sized for n keys at a load of 8/15, so that
// growth points (4/5 full, then 1.5x) stay on the same schedule.
func newShard(n int, depth uint) *liveShard {
	return &liveShard{slots: make([]liveSlot, max(liveMinCap, n*15/8+1)), depth: depth}
}

// home is the slot where the probe sequence of a key hashed to h starts:
// the hash bits below the shard's prefix, scaled to the capacity.
func (s *liveShard) home(h uint64) int {
	hi, _ := bits.Mul64(h<<s.depth, uint64(len(s.slots)))
	return int(hi)
}

// find returns the slot holding addr (hashed to h), or -1.
func (s *liveShard) find(addr, h uint64) int {
	lo, hi := uint32(addr), uint32(addr>>32)
	for i := s.home(h); ; {
		sl := &s.slots[i]
		if sl.addrLo == lo && sl.addrHi == hi {
			return i
		}
		if sl.empty() {
			return -1
		}
		if i++; i == len(s.slots) {
			i = 0
		}
	}
}

// put stores sl, whose key hashes to h and is not in s, without growing.
func (s *liveShard) put(sl liveSlot, h uint64) {
	i := s.home(h)
	for !s.slots[i].empty() {
		if i++; i == len(s.slots) {
			i = 0
		}
	}
	s.slots[i] = sl
	s.count++
}

// removeAt empties slot i.
func (s *liveShard) removeAt(i int) {
	// Backward-shift deletion: pull later entries of the probe run into
	// the hole unless that would move them before their home slot.
	n := len(s.slots)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		sl := &s.slots[j]
		if sl.empty() {
			break
		}
		h := s.home(hashAddr(sl.addr()))
		// sl stays if its home lies cyclically in (i, j].
		if i <= j {
			if i < h && h <= j {
				continue
			}
		} else if i < h || h <= j {
			continue
		}
		s.slots[i] = *sl
		i = j
	}
	s.slots[i] = liveSlot{}
	s.count--
	// Give memory back after most of a large live set was freed; the gap
	// between 1/8 full and the 4/5 growth point keeps churn from resizing.
	if n >= liveShrinkFrom && s.count*8 < n {
		s.resize(s.count * 2)
	}
}

// resize rehashes s into n slots (n must exceed its count).
func (s *liveShard) resize(n int) {
	old := s.slots
	s.slots = make([]liveSlot, max(liveMinCap, n))
	s.count = 0
	for k := range old {
		if sl := &old[k]; !sl.empty() {
			s.put(*sl, hashAddr(sl.addr()))
		}
	}
}
