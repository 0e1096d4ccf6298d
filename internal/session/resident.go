package session

import (
	"errors"
	"io/fs"
	"slices"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/residency"
	"github.com/memtrace/memtrace/internal/tracer"
)

// Resident attribution (bpf/resident.h, aggregate/resident.go): the probes
// sample write faults; here the sampled pages are checked
// (residency.Pagemap), and those no longer resident anonymous memory
// are uncharged through Unresident events, which a recording keeps.

// startResident attaches the page-fault tracepoints when resident
// attribution is on.
func (s *session) startResident() error {
	if s.cfg.ResidentBytes == 0 {
		return nil
	}
	if err := s.objs.AttachFaults(); err != nil {
		return err
	}
	if !residency.ZeroPagesKnown() {
		s.log.Warn("pagemap hides page frames without CAP_SYS_ADMIN, so a released page that is read again stays charged " +
			"to who first wrote it; run memtrace with CAP_SYS_ADMIN (as root outside a restricted container) for exact figures")
	}
	s.resident.Start()
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
			if p.Func.Mark() {
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
		s.log.Info("unwind tables: loading", "pid", pid, "files", paths)
	}
	h.finder.Placed(found)
	return false
}

// checkResidentDue checks the sampled pages when a check is due.
func (s *session) checkResidentDue() {
	if s.cfg.ResidentBytes == 0 || !s.resident.Due() {
		return
	}
	start := time.Now()
	// What the probes wrote since the last poll first: an mremap's move
	// (a moved event) read after the check had its pages uncharged at
	// their old place, and nothing left to move (TestResidentMoved lost
	// fill_a once on 6.1, the kernel matrix loading the machine).
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain before the resident check", "err", err)
	}
	s.checkResident()
	s.resident.Checked(start)
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
	gone, shrunk, err := s.readPagemap(pid)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("check resident pages", "pid", pid, "err", err)
		}
		return
	}
	if len(gone) > 0 || len(shrunk) > 0 {
		// -v: what a script (or a test) can wait for after it released
		// memory: a check has seen it.
		s.log.Info("resident pages released", "pid", pid, "pages", len(gone), "in_part", len(shrunk))
	}
	now := monotonicNow()
	for _, sp := range shrunk {
		// A fault larger than a page (a huge page): charged for what of
		// it stays, since a program may release part of it.
		s.apply(&event.Event{Time: now, PID: pid, Kind: event.Unresident, Addr: sp.Addr, Size: sp.Resident, StackID: -1})
	}
	if len(gone) == 0 {
		// Address 0 is never a sampled page: the check's time alone,
		// recorded, for the figures of a process that exits before the
		// next (aggregate.ResidentSnapshot.CheckedNS).
		gone = []uint64{0}
	}
	for _, a := range gone {
		s.apply(&event.Event{Time: now, PID: pid, Kind: event.Unresident, Addr: a, StackID: -1})
	}
}

// readPagemap reads pid's pagemap once for its sampled pages and its
// sampled faults larger than a page: the pages no longer resident, and
// the larger faults whose pages now hold fewer bytes than they are
// charged for, with Resident set to what they hold (0: none).
func (s *session) readPagemap(pid uint32) ([]uint64, []aggregate.SampledSpan, error) {
	m, err := residency.OpenPagemap(int(pid), tracer.PageSize)
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	gone, err := m.Unresident(s.table.ResidentPages(pid))
	if err != nil {
		return nil, nil, err
	}
	spans := s.table.ResidentSpans(pid)
	ranges := make([]residency.Range, len(spans))
	for i, sp := range spans {
		ranges[i] = residency.Range{Start: sp.Start, End: sp.End, Holes: sp.Holes}
	}
	held, err := m.ResidentBytes(ranges)
	if err != nil {
		return nil, nil, err
	}
	var shrunk []aggregate.SampledSpan
	for i, sp := range spans {
		if b := min(held[i], sp.Size); b < sp.Resident {
			sp.Resident = b
			shrunk = append(shrunk, sp)
		}
	}
	return gone, shrunk, nil
}
