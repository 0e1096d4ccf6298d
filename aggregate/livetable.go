package aggregate

import (
	"math"
	"math/bits"
)

// liveBlock is what is known about one live heap block.
type liveBlock struct {
	size uint64
	site uint32 // index into the owning process's sites
	ms   uint32 // allocation time, ms since the table's first event
}

// liveSlot is one slot of a liveTable. The address is split in two halves
// so that the slot packs into 20 bytes: a uint64 field would align the
// struct to 8 and pad it to 24, which is 20% more memory per live block.
type liveSlot struct {
	addrLo, addrHi uint32 // both zero: empty (address 0 is never live)
	size           uint32 // sizeInBig: the size is in liveTable.big
	site           uint32
	ms             uint32
}

// sizeInBig marks a block of 4 GiB or more; such sizes are rare enough to
// keep in a side map rather than widen every slot.
const sizeInBig = math.MaxUint32

const (
	liveMinCap     = 16
	liveShrinkFrom = 1 << 12 // tables smaller than this are not worth shrinking
)

// liveTable maps a live heap block's address to its liveBlock.
//
// It exists because memory per live block is what limits tracing a big
// process: a slot costs 20 bytes against 25 for a Go map slot of the same
// content (see BenchmarkLiveMemory). It is an open-addressing table with
// linear probing and backward-shift deletion (no tombstones, so long churn
// does not degrade it). The capacity is not a power of two: the home slot
// is chosen by Fibonacci hashing scaled to the capacity, so the table can
// grow by 1.5x and stay between 53% and 80% full.
type liveTable struct {
	slots []liveSlot
	count int
	big   map[uint64]uint64 // sizes >= 4 GiB, by address
}

func (t *liveTable) len() int { return t.count }

// home is the slot where addr's probe sequence starts.
func (t *liveTable) home(addr uint64) int {
	hi, _ := bits.Mul64(addr*0x9e3779b97f4a7c15, uint64(len(t.slots)))
	return int(hi)
}

func (s *liveSlot) addr() uint64 { return uint64(s.addrHi)<<32 | uint64(s.addrLo) }

// find returns the slot holding addr, or -1.
func (t *liveTable) find(addr uint64) int {
	if t.count == 0 || addr == 0 {
		return -1
	}
	lo, hi := uint32(addr), uint32(addr>>32)
	i := t.home(addr)
	for {
		s := &t.slots[i]
		if s.addrLo == lo && s.addrHi == hi {
			return i
		}
		if s.addrLo == 0 && s.addrHi == 0 {
			return -1
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

func (t *liveTable) get(addr uint64) (liveBlock, bool) {
	i := t.find(addr)
	if i < 0 {
		return liveBlock{}, false
	}
	return t.block(addr, &t.slots[i]), true
}

func (t *liveTable) block(addr uint64, s *liveSlot) liveBlock {
	b := liveBlock{size: uint64(s.size), site: s.site, ms: s.ms}
	if s.size == sizeInBig {
		b.size = t.big[addr]
	}
	return b
}

// insert makes b the block at addr (addr != 0). If a block was already
// there it is replaced and returned, so the caller can account for it.
func (t *liveTable) insert(addr uint64, b liveBlock) (old liveBlock, replaced bool) {
	if (t.count+1)*5 > len(t.slots)*4 {
		t.resize(max(liveMinCap, len(t.slots)+len(t.slots)/2))
	}
	lo, hi := uint32(addr), uint32(addr>>32)
	i := t.home(addr)
	for {
		s := &t.slots[i]
		if s.addrLo == lo && s.addrHi == hi {
			old, replaced = t.block(addr, s), true
			if s.size == sizeInBig {
				delete(t.big, addr)
			}
			break
		}
		if s.addrLo == 0 && s.addrHi == 0 {
			t.count++
			break
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
	t.store(&t.slots[i], addr, b)
	return old, replaced
}

func (t *liveTable) store(s *liveSlot, addr uint64, b liveBlock) {
	size := uint32(b.size)
	if b.size >= sizeInBig {
		size = sizeInBig
		if t.big == nil {
			t.big = make(map[uint64]uint64)
		}
		t.big[addr] = b.size
	}
	*s = liveSlot{addrLo: uint32(addr), addrHi: uint32(addr >> 32), size: size, site: b.site, ms: b.ms}
}

// remove deletes addr and returns its block.
func (t *liveTable) remove(addr uint64) (liveBlock, bool) {
	i := t.find(addr)
	if i < 0 {
		return liveBlock{}, false
	}
	b := t.block(addr, &t.slots[i])
	if t.slots[i].size == sizeInBig {
		delete(t.big, addr)
	}
	t.count--
	// Backward-shift deletion: pull later entries of the probe run into
	// the hole unless that would move them before their home slot.
	n := len(t.slots)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		s := &t.slots[j]
		if s.addrLo == 0 && s.addrHi == 0 {
			break
		}
		h := t.home(s.addr())
		// s may stay if its home lies cyclically in (i, j].
		if i <= j {
			if i < h && h <= j {
				continue
			}
		} else if i < h || h <= j {
			continue
		}
		t.slots[i] = *s
		i = j
	}
	t.slots[i] = liveSlot{}
	// Give memory back after a large live set has mostly been freed; the
	// gap between 1/8 and the 4/5 growth point keeps churn from resizing.
	if n >= liveShrinkFrom && t.count*8 < n {
		t.resize(max(liveMinCap, t.count*2))
	}
	return b, true
}

// resize rehashes into n slots (n must exceed count).
func (t *liveTable) resize(n int) {
	old := t.slots
	t.slots = make([]liveSlot, n)
	for k := range old {
		s := &old[k]
		if s.addrLo == 0 && s.addrHi == 0 {
			continue
		}
		i := t.home(s.addr())
		for t.slots[i].addrLo != 0 || t.slots[i].addrHi != 0 {
			if i++; i == n {
				i = 0
			}
		}
		t.slots[i] = *s
	}
}

// each calls fn for every live block until fn returns false. fn must not
// change the table.
func (t *liveTable) each(fn func(addr uint64, b liveBlock) bool) {
	for k := range t.slots {
		s := &t.slots[k]
		if s.addrLo == 0 && s.addrHi == 0 {
			continue
		}
		a := s.addr()
		if !fn(a, t.block(a, s)) {
			return
		}
	}
}
