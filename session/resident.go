package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/tracer"
)

// Resident attribution (bpf/resident.h, aggregate/resident.go): the probes
// sample write faults; here the sampled pages are checked against
// /proc/PID/pagemap, and those no longer resident anonymous memory are
// uncharged through Unresident events, which a recording keeps.

// residentCheckEvery is how often the sampled pages are checked: a page
// released stays charged for up to this long.
const residentCheckEvery = time.Second

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmFile    = 1 << 61 // a file page or shared anonymous memory: not RssAnon
)

// pagemapGap: sampled pages closer than this many pages are read in one
// pread (8 bytes a page) rather than one each.
const pagemapGap = 512

// pagemapChunk bounds one read to this many pages' entries (512 KiB), so
// that the buffer does not grow with the process (a 64 GiB range would
// need 128 MiB).
const pagemapChunk = 64 << 10

// startResident attaches the page-fault tracepoints when resident
// attribution is on.
func (s *session) startResident() error {
	if s.cfg.ResidentBytes == 0 {
		return nil
	}
	if err := s.objs.AttachFaults(); err != nil {
		return err
	}
	s.residentDue = time.Now().Add(residentCheckEvery)
	return nil
}

// traceFaults samples pid's faults (-p and --; the whole host samples
// every process's).
func (s *session) traceFaults(pid int) error {
	if s.cfg.ResidentBytes == 0 {
		return nil
	}
	return s.objs.TraceFaults(uint32(pid))
}

// scanResident prepares the whole host's resident-only mode for pid: no
// probe, but the unwind tables of its allocator files (the C library:
// its memory functions and malloc's internals), so that its faults there
// are charged to their callers from the first; a fault met in a file with
// no table yet is charged to the faulting instruction, and the table is
// built then. Each file once, as the heap mode probes each once. retry
// says its libraries are not mapped yet.
func (s *session) scanResident(pid int) (retry bool) {
	h := s.host
	found, err := h.finder.Scan(pid)
	if err != nil {
		return false // no allocator (Go, static), a kernel thread, gone
	}
	if len(found.Missing) > 0 {
		return true
	}
	var paths []string
	for _, g := range found.ByPath() { // one file each
		var marks []tracer.Placement
		for _, p := range g.New {
			if p.Func >= event.FuncMark {
				marks = append(marks, p) // --mark: probed as with --heap
			} else if !slices.Contains(paths, p.Path) {
				paths = append(paths, p.Path)
			}
		}
		if len(marks) == 0 {
			continue
		}
		if err := s.objs.Attach(h.att, marks); err != nil {
			s.log.Warn("attach", "pid", pid, "err", err)
			continue
		}
		for _, p := range marks {
			h.marked[p.Symbol]++
			s.log.Info("mark probed", "pid", pid, "function", p.Symbol, "module", p.Module, "path", p.Path)
		}
	}
	if len(paths) > 0 {
		s.objs.PreloadTableFiles(paths)
		s.log.Info("unwind tables loaded", "pid", pid, "files", paths)
	}
	h.finder.Placed(found)
	return false
}

// checkResidentDue checks the sampled pages when a check is due.
func (s *session) checkResidentDue() {
	if s.cfg.ResidentBytes == 0 || time.Now().Before(s.residentDue) {
		return
	}
	start := time.Now()
	s.checkResident()
	// A check costs tens of ms per GiB sampled (BenchmarkUnresidentPages):
	// with much memory it runs less often, so that it stays under 5% of a
	// CPU; released memory then stays charged longer.
	s.residentDue = time.Now().Add(max(residentCheckEvery, 20*time.Since(start)))
}

// checkResident checks every process's sampled pages now.
func (s *session) checkResident() {
	for _, pid := range s.table.ResidentPIDs() {
		s.checkResidentOf(pid)
	}
}

// checkResidentOf uncharges pid's sampled pages that are not resident
// anonymous memory. A process gone keeps its pages as last checked: its
// figures are those of its exit (whole host forgets it).
func (s *session) checkResidentOf(pid uint32) {
	gone, err := unresidentPages(int(pid), s.table.ResidentPages(pid))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("check resident pages", "pid", pid, "err", err)
		}
		return
	}
	now := monotonicNow()
	for _, a := range gone {
		s.apply(&event.Event{Time: now, PID: pid, Kind: event.Unresident, Addr: a, StackID: -1})
	}
}

// unresidentPages returns those of pages (sorted) that pid's pagemap shows
// not present, or not anonymous.
func unresidentPages(pid int, pages []uint64) ([]uint64, error) {
	if len(pages) == 0 {
		return nil, nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var gone []uint64
	var buf []byte
	for i := 0; i < len(pages); {
		j := i + 1
		for j < len(pages) && (pages[j]-pages[j-1])/tracer.PageSize < pagemapGap &&
			(pages[j]-pages[i])/tracer.PageSize < pagemapChunk {
			j++
		}
		first, last := pages[i]/tracer.PageSize, pages[j-1]/tracer.PageSize
		n := int(last-first+1) * 8
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
			return nil, fmt.Errorf("read pagemap of %d: %w", pid, err)
		}
		for _, a := range pages[i:j] {
			v := binary.LittleEndian.Uint64(buf[(a/tracer.PageSize-first)*8:])
			if v&pmPresent == 0 || v&pmFile != 0 {
				gone = append(gone, a)
			}
		}
		i = j
	}
	return gone, nil
}
