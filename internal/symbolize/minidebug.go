package symbolize

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"

	"github.com/ulikunitz/xz"
)

// MiniDebugInfo (Fedora, and any distribution that runs its recipe) keeps
// in a stripped module a section .gnu_debugdata: an xz-compressed ELF file
// whose .symtab holds the function symbols that .dynsym lacks (static and
// hidden functions), so that stack traces name them without debug
// packages. It has no DWARF.

// Bounds on .gnu_debugdata: real ones are tens of KiB compressed and a few
// hundred KiB unpacked; an xz stream claiming more is hostile.
const (
	maxMiniDebugCompressed = 64 << 20
	maxMiniDebugSize       = 256 << 20
)

// miniDebugInfo unpacks f's .gnu_debugdata, or returns nil if it has none.
func miniDebugInfo(f *elf.File) (*elf.File, error) {
	s := f.Section(".gnu_debugdata")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size == 0 {
		return nil, nil
	}
	if s.Size > maxMiniDebugCompressed {
		return nil, fmt.Errorf(".gnu_debugdata: %d bytes compressed, too large", s.Size)
	}
	packed, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf(".gnu_debugdata: %w", err)
	}
	return unpackMiniDebugInfo(packed)
}

// unpackMiniDebugInfo decompresses an xz stream holding an ELF file.
func unpackMiniDebugInfo(packed []byte) (*elf.File, error) {
	if err := checkXZDicts(packed); err != nil {
		return nil, fmt.Errorf(".gnu_debugdata: %w", err)
	}
	var out []byte
	err := guard(".gnu_debugdata", func() error {
		r, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(packed))
		if err != nil {
			return fmt.Errorf("xz: %w", err)
		}
		out, err = io.ReadAll(io.LimitReader(r, maxMiniDebugSize+1))
		if err != nil {
			return fmt.Errorf("xz: %w", err)
		}
		if len(out) > maxMiniDebugSize {
			return errors.New("unpacks to more than 256 MiB")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var ef *elf.File
	err = guard(".gnu_debugdata", func() error {
		ef, err = elf.NewFile(bytes.NewReader(out))
		return err
	})
	return ef, err
}

// maxXZDict bounds the LZMA2 dictionary an xz block may declare: the
// decoder allocates it whole before reading a byte, and xz -9 uses 64 MiB.
const maxXZDict = 64 << 20

var errXZ = errors.New("xz: malformed stream")

// checkXZDicts walks the blocks of a single xz stream through its index
// and refuses any whose LZMA2 filter declares a dictionary larger than
// maxXZDict, which a hostile stream could make up to 4 GiB.
func checkXZDicts(b []byte) error {
	const headerLen, footerLen = 12, 12
	if len(b) < headerLen+footerLen || string(b[:6]) != "\xfd7zXZ\x00" || string(b[len(b)-2:]) != "YZ" {
		return errXZ
	}
	foot := b[len(b)-footerLen:]
	indexLen := (uint64(le32(foot[4:])) + 1) * 4
	if indexLen > uint64(len(b)-headerLen-footerLen) {
		return errXZ
	}
	index := b[len(b)-footerLen-int(indexLen) : len(b)-footerLen]
	if index[0] != 0 {
		return errXZ
	}
	c := &cursor{b: index[1:]}
	records := c.uleb()
	at := uint64(headerLen)
	end := uint64(len(b) - footerLen - int(indexLen))
	for i := uint64(0); i < records && c.err == nil; i++ {
		unpadded := c.uleb()
		c.uleb() // uncompressed size
		if c.err != nil || at >= end || unpadded > end-at {
			return errXZ
		}
		if err := checkXZBlockHeader(b[at:end]); err != nil {
			return err
		}
		at += (unpadded + 3) &^ 3
	}
	if c.err != nil || at != end {
		return errXZ
	}
	return nil
}

// checkXZBlockHeader reads a block header's filter flags.
func checkXZBlockHeader(b []byte) error {
	size := (int(b[0]) + 1) * 4
	if b[0] == 0 || size > len(b) {
		return errXZ
	}
	c := &cursor{b: b[1 : size-4]} // less the CRC32
	flags := c.u8()
	if flags&0x40 != 0 {
		c.uleb() // compressed size
	}
	if flags&0x80 != 0 {
		c.uleb() // uncompressed size
	}
	for range int(flags&3) + 1 {
		id, n := c.uleb(), c.uleb()
		props := c.take(int(min(n, 1<<20)))
		if c.err != nil {
			return errXZ
		}
		if id == 0x21 { // LZMA2
			if len(props) != 1 || props[0] > 40 {
				return errXZ
			}
			if dict := uint64(2|props[0]&1) << (props[0]/2 + 11); dict > maxXZDict {
				return fmt.Errorf("xz: dictionary of %d bytes, more than %d", dict, maxXZDict)
			}
		}
	}
	return c.err
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
