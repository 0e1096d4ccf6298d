// Package pagewalk reads the accessed and dirty bits of a process's page
// table entries with a BPF iterator (bpf/pagewalk.bpf.c), for access
// statistics on kernels without idle page tracking, soft-dirty or DAMON's
// vaddr monitor. The walk is read-only; Clear resets the accessed bits
// through /proc/PID/clear_refs, so that a walk after it tells the pages
// accessed since.
package pagewalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// ErrNoDirectMap: the walk could not find the kernel's direct map (its
// base), so it cannot follow the page tables.
var ErrNoDirectMap = errors.New("kernel direct map not found")

// ErrSkipped: the walks passed over the process every time (it is gone,
// or it was always changing its mappings).
var ErrSkipped = errors.New("process passed over")

// maxTries bounds the walks of one reading.
const maxTries = 20

// Bits are what a walk says about a page.
type Bits uint8

const (
	// Mapped: the entry maps a page (present).
	Mapped Bits = 1 << iota
	// Accessed: the hardware set the accessed bit since the last clear.
	Accessed
	// Dirty: the page was written since it was mapped (the kernel clears
	// the dirty bit only on writeback, not through clear_refs).
	Dirty
)

// Table is the bits of the 512 pages of 2 MiB of address space.
type Table [512]Bits

// TableSpan is the address space a Table covers.
const TableSpan = 512 * 4096

// page table entry bits (x86-64).
const (
	entPresent    = 1 << 0
	entAccessed   = 1 << 5
	entDirty      = 1 << 6
	entSavedDirty = 1 << 58 // a shadow-stack kernel moves Dirty here on read-only pages
)

func entryBits(e uint64) Bits {
	if e&entPresent == 0 {
		return 0
	}
	b := Mapped
	if e&entAccessed != 0 {
		b |= Accessed
	}
	if e&(entDirty|entSavedDirty) != 0 {
		b |= Dirty
	}
	return b
}

// Walker walks processes' page tables, one walk at a time.
type Walker struct {
	mu     sync.Mutex
	objs   pagewalkObjects
	iter   *link.Iter
	levels uint32
	keys   []uint64
	vals   []pagewalkPmdCopy
}

// Open loads and attaches the iterator.
func Open() (*Walker, error) {
	w := &Walker{levels: pagingLevels()}
	if err := loadPagewalkObjects(&w.objs, nil); err != nil {
		return nil, fmt.Errorf("load page-table walk: %w", err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: w.objs.WalkVmas})
	if err != nil {
		w.objs.Close()
		return nil, fmt.Errorf("attach page-table walk: %w", err)
	}
	w.iter = it
	return w, nil
}

// Levels is the paging depth the walk follows (4 or 5).
func (w *Walker) Levels() int { return int(w.levels) }

// Close detaches and unloads the walk.
func (w *Walker) Close() error {
	err := w.iter.Close()
	return errors.Join(err, w.objs.Close())
}

// pagingLevels is 5 when the CPU has 5-level paging (la57) and the kernel
// was not told to leave it off; 4 otherwise.
func pagingLevels() uint32 {
	cmd, _ := os.ReadFile("/proc/cmdline")
	if bytes.Contains(cmd, []byte("no5lvl")) {
		return 4
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 4
	}
	for line := range strings.SplitSeq(string(info), "\n") {
		if strings.HasPrefix(line, "flags") {
			if strings.Contains(" "+line+" ", " la57 ") {
				return 5
			}
			return 4
		}
	}
	return 4
}

// Clear clears the accessed bits of pid's anonymous pages (clear_refs 2),
// then its soft-dirty bits (clear_refs 4). Only anonymous pages: the walk
// reads no others, and a file page's accessed bit is what reclaim keeps
// the page cache's working set by. Clearing accessed bits does not flush
// the TLB, and an access through a cached translation sets no bit: a page
// in constant use would look unused. The soft-dirty clear flushes the
// whole TLB of the process, even on a kernel without soft-dirty, where it
// does nothing else.
func Clear(pid int) error {
	if err := clearRefs(pid, "2"); err != nil {
		return err
	}
	return clearRefs(pid, "4")
}

func clearRefs(pid int, v string) error {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/clear_refs", pid), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("clear page bits of %d: %w", pid, err)
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("clear page bits of %d: %w", pid, err)
	}
	return nil
}

// Stats are a walk's counts.
type Stats struct {
	Tables uint64 // last-level tables and huge pages copied
	Failed uint64 // entries that could not be read or kept
	Tries  int    // walks made (those passed over the process, plus one)
	VMAs   uint64 // the process's mappings seen
	Walked uint64 // its anonymous mappings in range walked
	Base   uint64 // the kernel direct map's address, as calibrated
}

// Walk reads the bits of pid's anonymous pages in [lo, hi), calling fn for
// each 2 MiB with mapped pages (its start and bits, reused by the next
// call).
func (w *Walker) Walk(pid int, lo, hi uint64, fn func(start uint64, t *Table)) (Stats, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var zero uint32
	var cfg pagewalkWalkCfg
	if err := w.objs.CfgMap.Lookup(zero, &cfg); err != nil {
		return Stats{}, fmt.Errorf("walk pages of %d: %w", pid, err)
	}
	// The iterator passes over a process whose mmap lock it cannot take
	// at once (the process is mapping or unmapping): then walk again.
	tries := 0
	for ; ; tries++ {
		cfg.Lo, cfg.Hi, cfg.Tgid, cfg.Levels, cfg.Tables, cfg.Failed, cfg.Vmas, cfg.Walked = lo, hi, uint32(pid), w.levels, 0, 0, 0, 0
		if err := w.objs.CfgMap.Put(zero, &cfg); err != nil {
			return Stats{}, fmt.Errorf("walk pages of %d: %w", pid, err)
		}
		r, err := w.iter.Open()
		if err != nil {
			return Stats{}, fmt.Errorf("walk pages of %d: %w", pid, err)
		}
		_, err = io.Copy(io.Discard, r) // runs the walk: it writes nothing
		r.Close()
		if err != nil {
			return Stats{}, fmt.Errorf("walk pages of %d: %w", pid, err)
		}
		if err := w.objs.CfgMap.Lookup(zero, &cfg); err != nil {
			return Stats{}, fmt.Errorf("walk pages of %d: %w", pid, err)
		}
		if cfg.Vmas > 0 {
			break
		}
		if tries == maxTries {
			return Stats{}, fmt.Errorf("walk pages of %d: %w", pid, ErrSkipped)
		}
	}
	st := Stats{Tables: cfg.Tables, Failed: cfg.Failed, Tries: tries + 1, VMAs: cfg.Vmas, Walked: cfg.Walked, Base: cfg.Base}
	if cfg.Base == 0 && cfg.Failed > 0 {
		return st, fmt.Errorf("walk pages of %d: %w", pid, ErrNoDirectMap)
	}
	return st, w.drain(fn)
}

// drain reads and empties the map of copied tables.
func (w *Walker) drain(fn func(start uint64, t *Table)) error {
	const batch = 256
	if w.keys == nil {
		w.keys = make([]uint64, batch)
		w.vals = make([]pagewalkPmdCopy, batch)
	}
	var t Table
	var cursor ebpf.MapBatchCursor
	for {
		n, err := w.objs.Tables.BatchLookupAndDelete(&cursor, w.keys, w.vals, nil)
		for i := range n {
			if fn != nil {
				emit(w.keys[i], &w.vals[i], &t, fn)
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read page tables: %w", err)
		}
	}
}

// emit decodes a copied table (or huge page) into fn's Tables.
func emit(key uint64, v *pagewalkPmdCopy, t *Table, fn func(start uint64, t *Table)) {
	switch v.Level {
	case 1:
		for i, e := range v.Pte {
			t[i] = entryBits(e)
		}
		fn(key, t)
	case 2, 3:
		b := entryBits(v.Entry)
		for i := range t {
			t[i] = b
		}
		n := uint64(1)
		if v.Level == 3 {
			n = 512
		}
		for i := range n {
			fn(key+i*TableSpan, t)
		}
	}
}
