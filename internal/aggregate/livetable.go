package aggregate

import "math"

// liveBlock is what is known about one live heap block.
type liveBlock struct {
	size uint64
	site uint32 // index into the owning process's sites
	ms   uint32 // allocation time, ms since the table's first event
}

// liveSlot is one slot of a liveShard. The address is split in two halves
// so that the slot packs into 20 bytes: a uint64 field would align the
// struct to 8 and pad it to 24, which is 20% more memory per live block.
type liveSlot struct {
	addrLo, addrHi uint32 // both zero: empty (address 0 is never live)
	size           uint32 // sizeInBig: the size is in liveTable.big
	site           uint32
	ms             uint32
}

func (s *liveSlot) empty() bool  { return s.addrLo == 0 && s.addrHi == 0 }
func (s *liveSlot) addr() uint64 { return uint64(s.addrHi)<<32 | uint64(s.addrLo) }

// sizeInBig marks a block of 4 GiB or more; such sizes are rare enough to
// keep in a side map rather than widen every slot.
const sizeInBig = math.MaxUint32

const (
	liveMinCap = 16
	// liveShardMax bounds a shard: a full one splits in two instead of
	// growing, so no resize moves more than about 50,000 blocks and the
	// consumer never stalls long enough to overflow the ring buffer.
	liveShardMax = 1 << 16
	// liveShrinkFrom: shards smaller than this are not worth shrinking.
	liveShrinkFrom = 1 << 10
	// liveMaxDepth caps the directory at 2^16 entries (512 KiB), room for
	// 3 billion blocks; past it shards just grow. Only keys crafted to share
	// their hash's top bits could reach it before that.
	liveMaxDepth = 16
)

// liveTable maps a live heap block's address to its liveBlock.
//
// It exists because memory per live block is what limits tracing a big
// process: a slot costs 20 bytes against 25 for a Go map slot of the same
// content, and the table stays 53% to 80% full (see BenchmarkLiveMemory).
//
// It is extendible hashing over open-addressing shards: the top bits of
// the key's Fibonacci hash pick a shard through a directory, and each
// shard is a linear-probing table with backward-shift deletion (no
// tombstones, so long churn does not degrade it). A shard's capacity is
// not a power of two: its home slot is the rest of the hash scaled to the
// capacity, so it can grow by 1.5x.
type liveTable struct {
	dir   []*liveShard // indexed by the hash's top depth bits
	depth uint
	count int
	big   map[uint64]uint64 // sizes >= 4 GiB, by address

	shardMax int // slots; 0 means liveShardMax (tests lower it)
}

func hashAddr(addr uint64) uint64 { return addr * 0x9e3779b97f4a7c15 }

func (t *liveTable) len() int { return t.count }

func (t *liveTable) shard(h uint64) *liveShard {
	return t.dir[h>>(64-t.depth)] // a shift by 64 is 0: one shard
}

func (t *liveTable) get(addr uint64) (liveBlock, bool) {
	if t.count == 0 || addr == 0 {
		return liveBlock{}, false
	}
	h := hashAddr(addr)
	s := t.shard(h)
	i := s.find(addr, h)
	if i < 0 {
		return liveBlock{}, false
	}
	return t.block(addr, &s.slots[i]), true
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
	if t.dir == nil {
		t.dir = []*liveShard{newShard(0, 0)}
	}
	h := hashAddr(addr)
	s := t.shard(h)
	if (s.count+1)*5 > len(s.slots)*4 {
		t.grow(s, h)
		s = t.shard(h)
	}
	lo, hi := uint32(addr), uint32(addr>>32)
	i := s.home(h)
	for {
		sl := &s.slots[i]
		if sl.addrLo == lo && sl.addrHi == hi {
			old, replaced = t.block(addr, sl), true
			if sl.size == sizeInBig {
				delete(t.big, addr)
			}
			break
		}
		if sl.empty() {
			s.count++
			t.count++
			break
		}
		if i++; i == len(s.slots) {
			i = 0
		}
	}
	t.store(&s.slots[i], addr, b)
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
	if t.count == 0 || addr == 0 {
		return liveBlock{}, false
	}
	h := hashAddr(addr)
	s := t.shard(h)
	i := s.find(addr, h)
	if i < 0 {
		return liveBlock{}, false
	}
	b := t.block(addr, &s.slots[i])
	if s.slots[i].size == sizeInBig {
		delete(t.big, addr)
	}
	s.removeAt(i)
	t.count--
	return b, true
}

// grow makes room in s, which holds h: by growing it 1.5x, or, once it
// is as big as a shard may be, by splitting it in two.
func (t *liveTable) grow(s *liveShard, h uint64) {
	limit := t.shardMax
	if limit == 0 {
		limit = liveShardMax
	}
	if n := len(s.slots) + len(s.slots)/2; n <= limit || s.depth >= liveMaxDepth {
		s.resize(n)
		return
	}
	if s.depth == t.depth {
		dir := make([]*liveShard, 2*len(t.dir))
		for i, x := range t.dir {
			dir[2*i], dir[2*i+1] = x, x
		}
		t.dir, t.depth = dir, t.depth+1
	}
	// The keys whose next hash bit is 1 go to the second half.
	bit := 63 - s.depth
	ones := 0
	for k := range s.slots {
		if sl := &s.slots[k]; !sl.empty() {
			ones += int(hashAddr(sl.addr()) >> bit & 1)
		}
	}
	halves := [2]*liveShard{newShard(s.count-ones, s.depth+1), newShard(ones, s.depth+1)}
	for k := range s.slots {
		if sl := &s.slots[k]; !sl.empty() {
			h := hashAddr(sl.addr())
			halves[h>>bit&1].put(*sl, h)
		}
	}
	// s filled a run of 2^(depth-s.depth) directory entries: the first
	// half of the run is now halves[0], the second halves[1].
	run := 1 << (t.depth - s.depth)
	start := int(h>>(64-t.depth)) &^ (run - 1)
	for i := range run {
		t.dir[start+i] = halves[i*2/run]
	}
}

// each calls fn for every live block until fn returns false. fn must not
// change the table.
func (t *liveTable) each(fn func(addr uint64, b liveBlock) bool) {
	for i := 0; i < len(t.dir); {
		s := t.dir[i]
		i += 1 << (t.depth - s.depth) // the shard's run of directory entries
		for k := range s.slots {
			sl := &s.slots[k]
			if sl.empty() {
				continue
			}
			a := sl.addr()
			if !fn(a, t.block(a, sl)) {
				return
			}
		}
	}
}
