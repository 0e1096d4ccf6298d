package procfs

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
)

// PageEntry is one page's 8 bytes of /proc/PID/pagemap
// (Documentation/admin-guide/mm/pagemap.rst).
type PageEntry uint64

const (
	pmPresent   = 1 << 63
	pmSwapped   = 1 << 62
	pmFile      = 1 << 61 // a file page, or shared anonymous memory
	pmSoftDirty = 1 << 55 // written since the last clear_refs 4
	pmPFN       = 1<<55 - 1
)

// Present: the page is in RAM.
func (e PageEntry) Present() bool { return e&pmPresent != 0 }

// Swapped: the page is in swap.
func (e PageEntry) Swapped() bool { return e&pmSwapped != 0 }

// FileOrShared: the page is a file's, or shared anonymous memory.
func (e PageEntry) FileOrShared() bool { return e&pmFile != 0 }

// SoftDirty: the page was written since the last clear_refs 4.
func (e PageEntry) SoftDirty() bool { return e&pmSoftDirty != 0 }

// PFN is the page frame number of a present page; 0 without
// CAP_SYS_ADMIN, which the kernel needs to show it.
func (e PageEntry) PFN() uint64 { return uint64(e) & pmPFN }

// Pagemap is a process's /proc/PID/pagemap, open.
type Pagemap struct {
	f    *os.File
	name string // its /proc directory, for errors
}

// OpenPagemap opens pid's pagemap (a process gone matches os.ErrNotExist).
func OpenPagemap(pid int) (*Pagemap, error) {
	return OpenPagemapIn("/proc/" + strconv.Itoa(pid))
}

// OpenPagemapIn opens the pagemap in dir, a process's /proc directory
// ("/proc/self" too).
func OpenPagemapIn(dir string) (*Pagemap, error) {
	f, err := os.Open(dir + "/pagemap")
	if err != nil {
		return nil, goneOr(err)
	}
	return &Pagemap{f: f, name: dir}, nil
}

// Close closes it.
func (m *Pagemap) Close() error { return m.f.Close() }

// ReadAt reads the raw entries of pages from page number first into buf
// (8 bytes a page): the number of whole entries read, fewer past the end
// of the user address space (io.EOF then).
func (m *Pagemap) ReadAt(buf []byte, first uint64) (int, error) {
	n, err := m.f.ReadAt(buf, int64(first*8))
	if err != nil && err != io.EOF {
		return n / 8, fmt.Errorf("read %s/pagemap: %w", m.name, err)
	}
	return n / 8, err
}

// Entry is the i-th entry of raw entries read by ReadAt.
func Entry(buf []byte, i uint64) PageEntry {
	return PageEntry(binary.LittleEndian.Uint64(buf[i*8:]))
}
