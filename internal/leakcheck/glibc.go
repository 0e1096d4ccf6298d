package leakcheck

import "encoding/binary"

// GlibcChunkHeader recognizes glibc malloc's own pointers into a block: the
// arena (main_arena's top, bins and last remainder, in libc's data) points
// at chunk headers, and the header of the chunk after a block lies in the
// block's last word when the block uses it (malloc(24) gets a 32-byte chunk
// whose usable part overlaps the next chunk's prev_size). Such a pointer is
// bookkeeping, not the program's: valgrind never sees it (its malloc keeps
// no metadata in client memory), so memtrace drops it to agree.
//
// It reads the block's size field (the word before the block): ptr must be
// exactly the next chunk's header, 16-aligned, inside the block. For an
// allocator other than glibc's the size field is something else and the
// test almost never passes.
func GlibcChunkHeader(mem Memory, b Block, ptr uint64) bool {
	if ptr%16 != 0 || ptr <= b.Addr || b.Addr < 16 {
		return false
	}
	var w [8]byte
	if n, _ := mem.ReadAt(w[:], b.Addr-8); n != 8 {
		return false
	}
	field := binary.LittleEndian.Uint64(w[:])
	if field&2 != 0 {
		return false // IS_MMAPPED: no chunk follows
	}
	chunk := field &^ 7
	if chunk < 32 || chunk%16 != 0 || chunk < b.Size+8 {
		return false
	}
	return b.Addr-16+chunk == ptr
}
