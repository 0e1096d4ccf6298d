package footprint

import "encoding/binary"

// glibc's malloc on 64-bit Linux: the heaps of its secondary arenas are
// HEAP_MAX_SIZE-aligned mappings that begin with a heap_info; a block
// above the mmap threshold is a mapping of its own that begins with a
// chunk header whose size has IS_MMAPPED set.
const (
	heapMax     = 64 << 20 // HEAP_MAX_SIZE: 2 * DEFAULT_MMAP_THRESHOLD_MAX
	isMmapped   = 2
	chunkFlags  = 7
	maxChunks   = 1 << 16 // chunks walked per mapping: bounds a reading
	arenaHeader = 32      // ar_ptr, prev, size, mprotect_size
)

// glibcHeap reports whether v is glibc's: an arena's heap, or large
// blocks (adjacent ones share a VMA, so the walk goes chunk by chunk to
// its end).
func glibcHeap(v *vma, mem memory) bool {
	if !v.accessible() {
		return false
	}
	var b [arenaHeader]byte
	if v.start%heapMax == 0 && v.end-v.start <= heapMax && mem.read(b[:], v.start) == nil {
		arena := binary.LittleEndian.Uint64(b[0:])
		prev := binary.LittleEndian.Uint64(b[8:])
		size := binary.LittleEndian.Uint64(b[16:])
		protSize := binary.LittleEndian.Uint64(b[24:])
		if arena != 0 && prev%heapMax == 0 && size > 0 && size <= heapMax &&
			protSize%4096 == 0 && protSize <= heapMax {
			return true
		}
	}
	return glibcChunksEnd(v, mem) == v.end
}

// glibcChunksEnd is where the run of glibc's large blocks (mmapped
// chunks, one after another) that starts v ends: v.start when none does.
// The kernel merges a block's mapping with an anonymous mapping next to it
// that is not glibc's (another library's, the program's own): the blocks
// are then a part of v only.
func glibcChunksEnd(v *vma, mem memory) uint64 {
	var b [16]byte
	at := v.start
	for n := 0; n < maxChunks && at < v.end; n++ {
		if err := mem.read(b[:], at); err != nil {
			break
		}
		prevSize := binary.LittleEndian.Uint64(b[0:])
		size := binary.LittleEndian.Uint64(b[8:])
		sz := size &^ chunkFlags
		if prevSize != 0 || size&isMmapped == 0 || sz == 0 || sz%4096 != 0 || sz > v.end-at {
			break
		}
		at += sz
	}
	return at
}
