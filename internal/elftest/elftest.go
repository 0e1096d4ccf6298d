// Package elftest crafts hostile ELF files for the tests of the packages
// that parse binaries: a real file whose headers lie.
package elftest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"slices"
)

// WithSectionSize returns a copy of b, a little-endian ELF64 file, whose
// section name claims size bytes (sh_size), opened.
func WithSectionSize(b []byte, name string, size uint64) (*elf.File, error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	s := f.Section(name)
	if s == nil || f.Class != elf.ELFCLASS64 || f.ByteOrder != binary.LittleEndian {
		return nil, fmt.Errorf("no section %s in a little-endian ELF64 file", name)
	}
	out := slices.Clone(b)
	// The section's header is at e_shoff + index*e_shentsize; sh_size at +32.
	shoff, shentsize := binary.LittleEndian.Uint64(out[0x28:]), binary.LittleEndian.Uint16(out[0x3a:])
	binary.LittleEndian.PutUint64(out[shoff+uint64(slices.Index(f.Sections, s))*uint64(shentsize)+32:], size)
	return elf.NewFile(bytes.NewReader(out))
}
