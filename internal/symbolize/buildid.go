package symbolize

import (
	"debug/elf"
	"encoding/hex"
	"io"
)

// ntGNUBuildID is the note type of the GNU build-id (NT_GNU_BUILD_ID).
const ntGNUBuildID = 3

// maxNoteBytes bounds how much of a note segment is read: build-id notes are
// tens of bytes, and a hostile header must not make us read gigabytes.
const maxNoteBytes = 64 << 10

// buildID returns the GNU build-id as lowercase hex, or "" if there is none.
// It reads the PT_NOTE segments, which survive strip, and falls back to
// SHT_NOTE sections for files without program headers.
func buildID(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if id := findBuildID(f.ByteOrder, readBounded(p.Open(), p.Filesz)); id != "" {
			return id
		}
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE || s.Flags&elf.SHF_COMPRESSED != 0 {
			continue
		}
		if id := findBuildID(f.ByteOrder, readBounded(s.Open(), s.Size)); id != "" {
			return id
		}
	}
	return ""
}

func readBounded(r io.Reader, size uint64) []byte {
	if size > maxNoteBytes {
		size = maxNoteBytes
	}
	buf := make([]byte, size)
	n, _ := io.ReadFull(r, buf)
	return buf[:n]
}

// findBuildID walks the notes in b (namesz, descsz, type, name, desc; name
// and desc padded to 4 bytes) and returns the GNU build-id it finds.
func findBuildID(order interface{ Uint32([]byte) uint32 }, b []byte) string {
	for len(b) >= 12 {
		namesz, descsz, typ := uint64(order.Uint32(b)), uint64(order.Uint32(b[4:])), order.Uint32(b[8:])
		b = b[12:]
		nameEnd := align4(namesz)
		descEnd := nameEnd + align4(descsz)
		if descEnd > uint64(len(b)) {
			return ""
		}
		name := b[:namesz]
		desc := b[nameEnd : nameEnd+descsz]
		b = b[descEnd:]
		if typ == ntGNUBuildID && string(name) == "GNU\x00" && len(desc) > 0 {
			return hex.EncodeToString(desc)
		}
	}
	return ""
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }
