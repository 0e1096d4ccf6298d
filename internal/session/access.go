package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/residency"
	"github.com/memtrace/memtrace/internal/tracer"
	"github.com/memtrace/memtrace/internal/tracer/pagewalk"
)

// Access statistics (--access, docs/access.md): every epoch, each
// target's live blocks are read page by page (pagemap: present, the zero
// page, soft-dirty; the page-table walk: accessed), folded into figures
// by package access, and the bits cleared for the next epoch.

// errAccessHost: --access reads the pages of the processes it traces
// with -p or a command, not of the whole host.
var errAccessHost = errors.New("--access needs -p PID or a command")

// accessGap: pages of live blocks closer than this are read in one run.
const accessGap = 64

type accessState struct {
	walker    *pagewalk.Walker
	softDirty bool
	method    string
	procs     map[uint32]*accessProc
}

type accessProc struct {
	tracker *access.Tracker
	due     time.Time
	last    *access.Epoch
	ended   bool // its final epoch is taken
}

// checkAccess refuses --access without a target, before anything loads.
func (s *session) checkAccess() error {
	if s.cfg.Access > 0 && s.cfg.Host() {
		return fmt.Errorf("%w: %w", pipeline.ErrUsage, errAccessHost)
	}
	return nil
}

// startAccess loads the page-table walk and probes soft-dirty when
// --access is on.
func (s *session) startAccess() error {
	if s.cfg.Access == 0 {
		return nil
	}
	w, err := pagewalk.Open()
	if err != nil {
		return fmt.Errorf("--access: %w", err)
	}
	a := &accessState{walker: w, softDirty: softDirtyWorks(), procs: map[uint32]*accessProc{}}
	methods := []string{"pagemap", "pte-walk"}
	if a.softDirty {
		methods = append(methods, "soft-dirty")
	}
	a.method = strings.Join(methods, "+")
	s.access = a
	s.log.Info("access statistics", "method", a.method, "epoch", s.cfg.Access, "cold_after", s.cfg.ColdAfter,
		"paging_levels", w.Levels(), "written", map[bool]string{true: "soft-dirty", false: "unknown (no soft-dirty)"}[a.softDirty])
	return nil
}

// stopAccess unloads the walk.
func (s *session) stopAccess() {
	if s.access != nil {
		s.access.walker.Close()
	}
}

// softDirtyWorks reports whether the kernel keeps soft-dirty bits
// (CONFIG_MEM_SOFT_DIRTY): a page of our own written after clear_refs 4
// shows bit 55 in pagemap only then.
func softDirtyWorks() bool {
	b, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return false
	}
	defer syscall.Munmap(b)
	if err := pagewalk.Clear(os.Getpid()); err != nil {
		return false
	}
	b[0] = 1
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return false
	}
	defer f.Close()
	var e [8]byte
	if _, err := f.ReadAt(e[:], int64(uintptr(unsafe.Pointer(&b[0]))/4096*8)); err != nil {
		return false
	}
	return binary.LittleEndian.Uint64(e[:])&(1<<55) != 0
}

// accessDue starts tracking new targets and ends the epochs due.
func (s *session) accessDue() {
	if s.access == nil {
		return
	}
	now := time.Now()
	for pid, t := range s.targets {
		if t.exited || t.untraced {
			continue
		}
		p := s.access.procs[uint32(pid)]
		switch {
		case p == nil:
			s.startAccessOf(uint32(pid))
		case !p.ended && !now.Before(p.due):
			s.endAccessEpoch(uint32(pid), false)
			if s.time.dumps != nil {
				// --dump-dir: each epoch its numbered file (a mark's and the
				// last are written by onMark and closeTime).
				if err := s.dump(false); err != nil {
					s.log.Warn("--dump-dir", "err", err)
				}
			}
		}
	}
}

// startAccessOf clears pid's bits: its first epoch starts.
func (s *session) startAccessOf(pid uint32) {
	p := &accessProc{due: time.Now().Add(s.cfg.Access)}
	s.access.procs[pid] = p
	if err := pagewalk.Clear(int(pid)); err != nil {
		s.log.Warn("access statistics", "pid", pid, "err", err)
		p.ended = true
		return
	}
	now := monotonicNow()
	p.tracker = access.NewTracker(tracer.PageSize, s.cfg.ColdAfter, now)
	if s.time != nil && s.time.rec != nil {
		// A replay folds the recorded readings afresh (pipeline.AccessFolder).
		s.time.rec.Access(&recording.Access{PID: pid, Time: now, Start: true, ColdAfter: s.cfg.ColdAfter, PageSize: tracer.PageSize})
	}
	if s.exports != nil && s.exports.History != nil {
		s.exports.History.ColdRanges(pid, p.tracker.Cold) // --html's heap map greys cold runs
	}
}

// accessOnMark ends the epoch of the process that marked.
func (s *session) accessOnMark(pid uint32) {
	if s.access == nil {
		return
	}
	if p := s.access.procs[pid]; p != nil && !p.ended {
		s.endAccessEpoch(pid, false)
	}
}

// accessFinal ends pid's last epoch (at its exit stop, or the run's end).
func (s *session) accessFinal(pid uint32) {
	if s.access == nil {
		return
	}
	if p := s.access.procs[pid]; p != nil && !p.ended {
		s.endAccessEpoch(pid, true)
	}
}

// accessFinalAll ends the epochs of the targets still there.
func (s *session) accessFinalAll() {
	if s.access == nil {
		return
	}
	pids := make([]int, 0, len(s.access.procs))
	for pid := range s.access.procs {
		pids = append(pids, int(pid))
	}
	sort.Ints(pids)
	for _, pid := range pids {
		s.accessFinal(uint32(pid))
	}
}

// endAccessEpoch reads pid's pages, clears its bits (the next epoch
// starts) and reports the epoch: NDJSON records with --json at once;
// the text section follows the final report (printAccess).
func (s *session) endAccessEpoch(pid uint32, final bool) {
	a := s.access
	p := a.procs[pid]
	start := time.Now()
	blocks := pipeline.AccessBlocks(s.table, pid)
	pages, tables, err := s.readAccess(pid, blocks)
	if err == nil && !final {
		err = pagewalk.Clear(int(pid))
	}
	if err != nil {
		p.ended = true
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, pagewalk.ErrSkipped) {
			// It exited before its exit was seen: its last epoch stands.
			s.log.Debug("access statistics", "pid", pid, "err", err)
			return
		}
		s.log.Warn("access statistics", "pid", pid, "err", err)
		return
	}
	comm := ""
	if t := s.targets[int(pid)]; t != nil {
		comm = t.comm
	}
	now := monotonicNow()
	if s.time != nil && s.time.rec != nil {
		// The reading, not the figures: the replay's Table holds the same
		// blocks at this point of the stream.
		s.time.rec.Access(&recording.Access{PID: pid, Time: now, Final: final, WrittenKnown: a.softDirty,
			Comm: comm, Method: a.method, Pages: *pages})
	}
	e := p.tracker.End(now, blocks, pages, a.softDirty, a.method)
	// The next epoch began with the clear: it lasts --access from there,
	// however long this reading took.
	p.due = time.Now().Add(s.cfg.Access)
	s.log.Debug("access epoch", "pid", pid, "epoch", e.Number, "blocks", len(blocks), "tables", tables, "took", time.Since(start))
	p.last = &e
	p.ended = final
	s.exports.UpdateAccess(pid, e) // --listen's gauges
	if s.cfg.JSON {
		if err := report.WriteAccess(s.out, pid, comm, e, s.res, final); err != nil {
			s.log.Warn("write access records", "err", err)
		}
	}
	if s.time.dumps != nil {
		s.time.accessRecords = append(s.time.accessRecords, accessDumped{pid, comm, e, final})
	}
}

// accessDumped is an epoch waiting for the next numbered dump.
type accessDumped struct {
	pid   uint32
	comm  string
	e     access.Epoch
	final bool
}

// readAccess reads the pages under blocks: pagemap for presence and
// soft-dirty, the walk for the accessed bits.
func (s *session) readAccess(pid uint32, blocks []access.Block) (*access.Runs, uint64, error) {
	a := s.access
	ranges := access.Ranges(blocks, tracer.PageSize, accessGap)
	runs := &access.Runs{PageSize: tracer.PageSize}
	if len(ranges) == 0 {
		return runs, 0, nil
	}
	m, err := residency.OpenPagemap(int(pid), tracer.PageSize)
	if err != nil {
		return nil, 0, err
	}
	defer m.Close()
	for _, r := range ranges {
		run, err := m.AccessRun(r, a.softDirty)
		if err != nil {
			return nil, 0, err
		}
		runs.Runs = append(runs.Runs, run)
	}
	lo, hi := ranges[0].Start, ranges[len(ranges)-1].End
	st, err := a.walker.Walk(int(pid), lo, hi, func(start uint64, t *pagewalk.Table) {
		markAccessed(runs, start, t)
	})
	if err != nil {
		return nil, 0, err
	}
	return runs, st.Tables, nil
}

// markAccessed sets Accessed on the pages of runs that t says were.
func markAccessed(runs *access.Runs, start uint64, t *pagewalk.Table) {
	ps := runs.PageSize
	end := start + pagewalk.TableSpan
	i := sort.Search(len(runs.Runs), func(i int) bool {
		r := runs.Runs[i]
		return r.Start+uint64(len(r.Pages))*ps > start
	})
	for ; i < len(runs.Runs) && runs.Runs[i].Start < end; i++ {
		r := &runs.Runs[i]
		rEnd := r.Start + uint64(len(r.Pages))*ps
		for a := max(start, r.Start); a < min(end, rEnd); a += ps {
			if t[(a-start)/ps]&pagewalk.Accessed != 0 {
				r.Pages[(a-r.Start)/ps] |= access.Accessed
			}
		}
	}
}

// dumpAccess writes into a numbered dump the access epochs ended since
// the previous one.
func (s *session) dumpAccess(w io.Writer) error {
	for _, d := range s.time.accessRecords {
		if err := report.WriteAccess(w, d.pid, d.comm, d.e, s.res, d.final); err != nil {
			return err
		}
	}
	s.time.accessRecords = s.time.accessRecords[:0]
	return nil
}

// printAccess writes the "memory by access" section of each target's
// last epoch after the final text report.
func (s *session) printAccess() error {
	if s.access == nil || s.cfg.JSON {
		return nil
	}
	pids := make([]int, 0, len(s.access.procs))
	for pid, p := range s.access.procs {
		if p.last != nil {
			pids = append(pids, int(pid))
		}
	}
	sort.Ints(pids)
	for _, pid := range pids {
		comm := ""
		if t := s.targets[pid]; t != nil {
			comm = t.comm
		}
		o := report.Options{Top: s.cfg.Top, Raw: s.cfg.Raw}
		if err := report.WriteAccessText(s.out, uint32(pid), comm, *s.access.procs[uint32(pid)].last, s.res, o); err != nil {
			return fmt.Errorf("write access section: %w", err)
		}
	}
	return nil
}

// accessForget restarts pid's access statistics (exec replaced its
// memory): its next epoch 1 starts afresh.
func (s *session) accessForget(pid int) {
	if s.access != nil {
		delete(s.access.procs, uint32(pid))
	}
}
