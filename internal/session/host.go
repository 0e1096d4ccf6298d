package session

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/tracer"
)

// The whole-host mode (no target): probes without a PID filter on every
// distinct allocator file in use, found process by process (and on the
// --mark functions of every file that has them, the same way); raw
// tracepoints on exec (a new program may bring a new allocator file) and
// exit (a process's final records are reported, then it is dropped, so
// that memory stays bounded however long the run). Sampled by default.

// hostState is the whole-host mode's part of a session.
type hostState struct {
	finder *host.Finder
	filter host.Filter
	// att holds every system-wide probe (PID 0: no filter).
	att *tracer.Attachment
	// scans are the processes to scan again for new allocator files.
	scans host.Scans
	// exits says when the exits the printer holds are written before the
	// next report.
	exits host.ExitBatch
	// seen: the processes whose events were met.
	seen host.Seen
	// marked counts, per --mark function, the files it is probed in.
	marked map[string]int
	// rollups: the latest light readings of the processes listed only
	// (hostlist.go).
	rollups rollups
}

// newHost is the whole-host mode's state; the run loads the objects with
// hostOptions.
func (s *session) newHost() *hostState {
	h := &hostState{
		finder: &host.Finder{Allocator: s.cfg.Allocator, Self: os.Getpid()},
		filter: host.Filter{Comm: s.cfg.Comm, Cgroup: s.cfg.CgroupPath},
		att:    &tracer.Attachment{PID: 0},
		marked: map[string]int{},
	}
	if len(s.cfg.Marks) > 0 {
		h.finder.Extra = func(mods []allocator.Module) []allocator.Probe {
			probes, _ := s.bindMarks(mods) // most processes have none: no warning each (timeline.go)
			return probes
		}
	}
	return h
}

// hostOptions are the whole-host mode's load options.
func (s *session) hostOptions(o *tracer.Options) {
	o.Host, o.Comm, o.CgroupPath = true, s.cfg.Comm, s.cfg.CgroupDir
}

// startHost attaches to exec and exit, then probes the allocator files of
// every process running.
func (s *session) startHost() error {
	h := s.host
	// Exec and exit first, so that no process started during the scan
	// is missed.
	if err := s.objs.AttachHost(); err != nil {
		return err
	}
	start := time.Now()
	pids, err := s.hostPIDs()
	if err != nil {
		return err
	}
	scanned := 0
	for _, pid := range pids {
		// Resident memory only: every process's unwind tables are loaded
		// (once per file, cached across runs), so that a program started
		// later finds its C library's ready; only the filters' faults count.
		if pid == h.finder.Self || (s.cfg.Heap && !h.filter.Match(pid)) {
			continue
		}
		scanned++
		if _, err := s.scanProcess(pid); err != nil {
			return err
		}
	}
	// The faults last: a process running now has its C library's table
	// (scanResident), so that its first sampled faults in memset or
	// malloc's internals are charged to their callers, not to libc's code.
	if err := s.startResident(); err != nil { // resident.go
		return err
	}
	files := h.finder.Files()
	s.log.Info("attached", "processes", scanned, "files", len(files), "probes", h.att.Probes(), "took", time.Since(start))
	for _, f := range files {
		s.log.Info("allocator file", "module", f)
	}
	if len(files) == 0 && s.cfg.Heap {
		s.log.Info("no allocator in use yet: the processes that start one are probed as they start")
	}
	for _, name := range s.cfg.Marks {
		if h.marked[name] == 0 {
			s.log.Warn("--mark: function found in no traced process yet: probed when one that has it starts", "function", name)
		}
	}
	return nil
}

// hostIdle runs between polls in whole-host mode: the scans that are due,
// and the batch of exits if it cannot wait for the next report
// (host.ExitBatch).
func (s *session) hostIdle() error {
	if s.host == nil {
		return nil
	}
	s.runScans()
	if pids, _ := s.pr.Held(); s.host.exits.Due(len(pids), s.cfg.Interval > 0) {
		return s.flushExits()
	}
	return nil
}

// nextWait is how long the next poll may wait: pollWait, or less in
// whole-host mode when a scan falls due sooner.
func (s *session) nextWait() time.Duration {
	if s.host == nil {
		return pollWait
	}
	return s.host.scans.Wait(pollWait)
}

// scanProcess looks for allocator files of pid not probed yet and probes
// them. retry says its libraries are not all mapped yet. The error is
// fatal (the kernel refuses uprobes); anything else is logged.
func (s *session) scanProcess(pid int) (retry bool, err error) {
	h := s.host
	if !s.cfg.Heap {
		return s.scanResident(pid), nil // resident.go
	}
	found, err := h.finder.Scan(pid)
	if err != nil {
		if !errors.Is(err, allocator.ErrNotFound) && !errors.Is(err, allocator.ErrNoProcess) {
			s.log.Info("scan", "pid", pid, "err", err)
		}
		return false, nil
	}
	if len(found.Missing) > 0 {
		return true, nil
	}
	// Its code's unwind tables (each file's once, host-wide), built in
	// the background: until one is in, allocations are charged to the
	// frame in its file (docs/unwinding.md, "Before the tables").
	if _, err := s.objs.PreloadTables(pid, nil); err != nil {
		s.log.Debug("unwind tables", "pid", pid, "err", err)
	}
	for _, g := range found.ByPath() {
		for _, p := range g.New {
			s.log.Info("probe", "pid", pid, "function", p.Symbol, "module", p.Module,
				"offset", fmt.Sprintf("%#x", p.Offset), "at", fmt.Sprintf("+%d", p.Skip), "why", p.Why)
		}
		if err := s.objs.Attach(h.att, g.New); err != nil {
			if errors.Is(err, tracer.ErrNoUprobes) || errors.Is(err, tracer.ErrPermission) {
				return false, err
			}
			if errors.Is(err, tracer.ErrProcessGone) {
				s.log.Debug("attach", "pid", pid, "module", g.New[0].Module, "err", err)
				continue
			}
			s.log.Warn("cannot probe a process's allocator: its heap is left out of the report", "pid", pid, "module", g.New[0].Module, "err", err)
			continue
		}
		h.finder.Placed(g)
		s.log.Info("probed", "pid", pid, "module", g.New[0].Module, "path", g.New[0].Path, "probes", len(g.New))
		for _, p := range g.New {
			if p.Func.Mark() {
				h.marked[p.Symbol]++
				s.log.Info("mark probed", "pid", pid, "function", p.Symbol, "module", p.Module, "path", p.Path)
			}
		}
	}
	return false, nil
}

// scheduleScan queues a scan of pid, unless one is queued.
func (s *session) scheduleScan(pid int) {
	if pid != s.host.finder.Self {
		s.host.scans.Add(pid)
	}
}

// runScans runs the scans that are due (host.Scans).
func (s *session) runScans() {
	s.host.scans.Run(func(pid int) bool {
		retry, err := s.scanProcess(pid)
		if err != nil {
			s.log.Warn("scan", "pid", pid, "err", err)
		}
		return retry
	}, func(pid int) {
		_ = s.res.Capture(pid) // its libraries are all there: its mappings for symbols
	})
}

// hostApply accounts one event of the whole-host mode.
func (s *session) hostApply(e *event.Event) {
	switch e.Kind {
	case event.Exec:
		s.hostExec(e)
		s.releaseExecve(e.PID) // the new program's (execve.go)
		return
	case event.Exit:
		s.dropExecve(e.PID) // an exec it never completed (execve.go)
		s.hostExit(e.PID, e.Comm, e.Time)
		return
	case event.CodeMap:
		if err := s.res.AddLibrary(int(e.PID), e.Path, e.Addr); err != nil {
			s.log.Info("dlopen'ed library", "pid", e.PID, "path", e.Path, "err", err)
		}
		// The library may bring an allocator.
		s.scheduleScan(int(e.PID))
		return
	}
	s.hostSeen(e.PID)
	s.feedEvent(e)
}

// hostSeen registers the process of an event: when first seen (a process
// running since before, or a fork), its name and mappings are read now,
// while it lives.
func (s *session) hostSeen(pid uint32) {
	if s.host.seen.Same(pid) {
		return
	}
	if !s.table.Known(pid) {
		s.feed(pipeline.Input{Kind: pipeline.InProcess, PID: pid, Comm: s.host.seen.Comm(pid)})
		_ = s.res.Capture(int(pid))
	}
}

// hostExec: a process executed a new program. The old program's
// statistics are void, as with --; the new one may bind to an allocator
// file not probed yet.
func (s *session) hostExec(e *event.Event) {
	h := s.host
	pid := e.PID
	if s.table.Known(pid) {
		// The probes reset its counts at the exec itself; only the old
		// program's sampled blocks are left to forget.
		s.objs.ForgetBlocks(pid, s.table.LiveAddrs(pid))
		s.objs.ForgetStacks(pid)
		s.stacks.Forget(pid)
		s.feed(pipeline.Input{Kind: pipeline.InForget, PID: pid})
	}
	// A new address space: the old program's mappings are void, whether
	// or not the process was known (a wrapper that execs at once).
	s.res.Forget(int(pid))
	s.footprints.Forget(int(pid))
	h.seen.Forget(pid, false)
	if e.Size != 0 { // it passes --comm and --cgroup
		h.seen.Executed(pid, e.Comm)
		// Its program is mapped now, its libraries soon: read what is
		// there at once, in case it exits before the scan (a short-lived
		// process's call sites are mostly in its program). One that ran
		// for less than the ring's latency is gone already: its program
		// is found by the file the exec loaded.
		if err := s.res.Capture(int(pid)); errors.Is(err, os.ErrNotExist) && e.Program != nil {
			p := e.Program
			err = s.res.AddProgram(int(pid), symbolize.Program{Path: e.Path, Start: p.Start, End: p.End, Dev: p.Dev, Ino: p.Ino, Size: p.Size})
			s.log.Debug("exited before its mappings were read", "pid", pid, "program", e.Path, "err", err)
		}
		s.scheduleScan(int(pid))
	}
}

// hostExit: a process's last thread exited, after all its events. Its
// final records are held for the next batch, and it is dropped.
func (s *session) hostExit(pid uint32, comm string, when uint64) {
	h := s.host
	defer s.footprints.Forget(int(pid))
	h.scans.Drop(int(pid))
	h.seen.Forget(pid, true)
	c, counted := s.objs.CountsOf(pid)
	if !s.table.Known(pid) && !counted {
		s.objs.Forget(pid, nil)
		s.res.Forget(int(pid)) // captured at its exec or first event
		// -v: it made no allocation (nor sampled fault) while traced, so
		// it has no record; a script (or a test) can wait for this line
		// as for "exit held". Only with --comm, which names the processes
		// meant: the whole host's every short-lived command would be one.
		if h.filter.Comm != "" && comm == h.filter.Comm {
			s.log.Info("exit unrecorded", "pid", pid, "comm", comm)
		}
		return
	}
	if counted {
		s.feed(pipeline.Input{Kind: pipeline.InExactCounts, PID: pid, N: c.Allocs, M: c.AllocBytes})
	}
	s.feed(pipeline.Input{Kind: pipeline.InProcess, PID: pid, Comm: comm})
	if n, ok := s.objs.LostOf(pid); ok {
		s.feed(pipeline.Input{Kind: pipeline.InLost, PID: pid, N: n})
	}
	s.feed(pipeline.Input{Kind: pipeline.InExited, PID: pid, Time: when})
	pids, _ := s.pr.Held()
	h.exits.Exited(len(pids))
	s.objs.Forget(pid, s.table.LiveAddrs(pid))
	s.feed(pipeline.Input{Kind: pipeline.InForget, PID: pid}) // held for the next batch (pipeline.Printer)
	// -v: what a script (or a test) can wait for before it ends the run:
	// the batch itself is written at the next report (host.ExitBatch).
	s.log.Info("exit held", "pid", pid, "comm", comm)
}

// flushExits writes the final records of the processes that exited since
// the last batch, then forgets their mappings.
func (s *session) flushExits() error {
	pids, exits := s.pr.Held()
	if len(pids) == 0 {
		return nil
	}
	if _, total, err := s.objs.Lost(); err == nil {
		s.feed(pipeline.Input{Kind: pipeline.InTotalLost, N: total})
	}
	s.exportExited(exits) // exports.go: while their mappings and stacks are known
	err := s.feed(pipeline.Input{Kind: pipeline.InReport, Report: recording.Report{Time: monotonicNow(), Final: true, Exited: true}})
	for _, pid := range pids {
		// -v: what a script (or a test) can wait for, not a fixed time.
		s.log.Info("exit reported", "pid", pid, "batch", len(pids))
		if !s.table.Known(uint32(pid)) { // not a new process with the same PID
			s.res.Forget(pid)
			s.objs.ForgetStacks(uint32(pid)) // sampled mode takes stacks: keep them bounded
			s.stacks.Forget(uint32(pid))
		}
	}
	return err
}

// setExactCounts gives the table the probes' exact allocation counts
// (sampled mode). With -p and -- only the targets have counts.
func (s *session) setExactCounts() {
	counts, err := s.objs.Counts()
	if err != nil {
		s.log.Warn("read exact counts", "err", err)
		return
	}
	for pid, c := range counts {
		if s.host != nil {
			// A process with counts and no sample yet: named here, or the
			// counts made it known nameless (comm "").
			s.hostSeen(pid)
		}
		if s.host != nil || s.targets[int(pid)] != nil {
			s.feed(pipeline.Input{Kind: pipeline.InExactCounts, PID: pid, N: c.Allocs, M: c.AllocBytes})
		}
	}
}

// sweepHost drops what exits missed: processes gone from /proc whose exit
// event never came (lost in a full ring), and their BPF map entries.
func (s *session) sweepHost() {
	// Everything committed to the ring first: a process that exited just
	// now has its exit event there.
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain", "err", err)
	}
	gone := 0
	for _, pid := range s.table.Processes() {
		if !host.Alive(int(pid)) {
			s.hostExit(pid, "", monotonicNow())
			gone++
		}
	}
	s.host.seen.Sweep()
	for pid := range s.execveHeld { // their exec and exit events were lost (execve.go)
		if !host.Alive(int(pid)) {
			s.dropExecve(pid)
		}
	}
	n := s.objs.Sweep(func(pid uint32) bool { return host.Alive(int(pid)) })
	s.log.Info("sweep", "processes", len(s.table.Processes()), "gone without exit", gone, "map entries deleted", n)
}
