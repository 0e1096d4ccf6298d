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
	for _, pid := range s.table.ResidentPIDs() {
		s.checkResidentLive(pid)
	}
	s.resident.Checked(start)
}

// checkResidentLive is checkResidentOf for a process that runs on while it
// is checked: an mremap after the drain above and before the pagemap read
// moves pages the check would find gone at their old place, and the
// move, read after, would have nothing left to move (TestResidentMoved
// kept 6 to 12 of fill_c's 32 MiB in 2 runs of 5 on 6.12). So the
// pagemap is read first, then what the probes wrote meanwhile is
// applied, and only then are the pages found gone uncharged, but for
// those the events since have put there anew (a move's new range, a new
// sample): the read is older than them.
func (s *session) checkResidentLive(pid uint32) {
	gone, shrunk, ok := s.readChecked(pid)
	if !ok {
		return
	}
	s.racing = &raceWatch{pid: pid}
	_, err := s.drain.Poll(0, s.apply)
	w := s.racing
	s.racing = nil
	if err != nil {
		s.log.Warn("drain after the resident check", "err", err)
	}
	if w.ended {
		return // exited or executed: its figures are those it had
	}
	gone, shrunk = w.keep(gone, shrunk)
	s.uncharge(pid, gone, shrunk)
}

// raceWatch gathers, while the ring is drained between a process's
// pagemap read and its uncharging, the ranges its events put sampled
// pages in since the read.
type raceWatch struct {
	pid    uint32
	ranges [][2]uint64 // [start, end)
	ended  bool        // the process exited or executed another program
}

// saw notes an event applied during the drain.
func (w *raceWatch) saw(e *event.Event) {
	if e.PID != w.pid {
		return
	}
	switch e.Kind {
	case event.Fault, event.Moved, event.Mremap:
		w.ranges = append(w.ranges, [2]uint64{e.Addr, e.Addr + max(e.Size, e.OldSize, tracer.PageSize)})
	case event.Exit, event.Exec:
		w.ended = true
	}
}

// keep drops from gone and shrunk what lies in a range seen since the read.
func (w *raceWatch) keep(gone []uint64, shrunk []aggregate.SampledSpan) ([]uint64, []aggregate.SampledSpan) {
	if len(w.ranges) == 0 {
		return gone, shrunk
	}
	in := func(start, end uint64) bool {
		for _, r := range w.ranges {
			if start < r[1] && r[0] < end {
				return true
			}
		}
		return false
	}
	gone = slices.DeleteFunc(gone, func(a uint64) bool { return in(a, a+tracer.PageSize) })
	shrunk = slices.DeleteFunc(shrunk, func(sp aggregate.SampledSpan) bool { return in(sp.Start, sp.End) })
	return gone, shrunk
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
	if gone, shrunk, ok := s.readChecked(pid); ok {
		s.uncharge(pid, gone, shrunk)
	}
}

// readChecked is readPagemap, with its error logged: false when pid's
// pagemap could not be read (a process gone is routine).
func (s *session) readChecked(pid uint32) ([]uint64, []aggregate.SampledSpan, bool) {
	gone, shrunk, err := s.readPagemap(pid)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("check resident pages", "pid", pid, "err", err)
		}
		return nil, nil, false
	}
	return gone, shrunk, true
}

// uncharge applies a check of pid's pagemap: the pages gone, and the
// faults larger than a page that hold fewer bytes.
func (s *session) uncharge(pid uint32, gone []uint64, shrunk []aggregate.SampledSpan) {
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
