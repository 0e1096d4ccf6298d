package session

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/launch"
	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/selfmem"
	"github.com/memtrace/memtrace/internal/tracer"
)

// leakState is the leak check's part of a session: the judged results
// (pipeline.Leaks), and the blocks forked children inherited from their
// parents.
type leakState struct {
	*pipeline.Leaks
	// inherited: with -f, the blocks forked children inherited.
	inherited leakcheck.Inherited
	// vforked: children running in their parent's memory (vfork) until
	// they exec; one that exits first has no heap of its own to check.
	vforked map[int]bool
}

func (s *session) leaks() *leakState {
	if s.leak == nil {
		s.leak = newLeakState(&s.cfg.LeakConfig)
	}
	return s.leak
}

func newLeakState(cfg *LeakConfig) *leakState {
	return &leakState{
		Leaks:   pipeline.NewLeaks(cfg),
		vforked: map[int]bool{},
	}
}

// leakCheckAtExit checks a process stopped at its exit, before its address
// space is torn down.
func (s *session) leakCheckAtExit(st launch.Stop) {
	if !s.cfg.LeakCheck {
		return
	}
	if s.leaks().vforked[st.PID] {
		// Its parent's memory, not its own: the parent is checked.
		s.log.Info("leak check: a vfork child exits before exec, not checked", "pid", st.PID)
		return
	}
	if s.noAllocator(st.PID, "at exit") {
		return
	}
	var threads []leakcheck.Thread
	var regs []uint64
	if st.Regs != nil {
		threads = []leakcheck.Thread{{SP: st.Regs.Rsp}}
		regs = launch.GPRegs(st.Regs)
	}
	s.runLeakCheck(st.PID, threads, regs, false, "at exit")
	s.leaks().inherited.Drop(st.PID)
}

// leakCheckRunning checks the -p targets still running when the run ends:
// each is frozen (every thread stopped) for the time of the check.
func (s *session) leakCheckRunning() {
	if !s.cfg.LeakCheck || len(s.cfg.Command) > 0 {
		return
	}
	for _, pid := range s.cfg.PIDs {
		t := s.targets[pid]
		if t == nil || t.exited || s.leaks().Judge.Verdicts[pid] != nil || s.noAllocator(pid, "when the run ended") {
			continue
		}
		f, err := launch.Freeze(pid)
		if err != nil {
			r := &leakcheck.Verdict{PID: pid, Comm: comm(pid), When: "when the run ended", Err: err}
			s.leaks().Judge.Judge(r, nil, nil)
			s.recordLeakCheck(r, nil)
			s.log.Warn("leak check: cannot stop the process, so it is not checked", "pid", pid, "err", err)
			continue
		}
		var threads []leakcheck.Thread
		var regs []uint64
		for _, th := range f.Threads {
			threads = append(threads, leakcheck.Thread{SP: th.Regs.Rsp})
			regs = append(regs, launch.GPRegs(&th.Regs)...)
		}
		// Blocks allocated before memtrace attached are unknown: the
		// heap outside the known blocks counts as roots.
		s.runLeakCheck(pid, threads, regs, true, "when the run ended")
		if err := f.Release(); err != nil {
			s.log.Warn("leak check: resume the process", "pid", pid, "err", err)
		}
	}
}

// noAllocator: pid is a target in which no allocator was probed (a Go
// program, a static binary without symbols: resident memory only). Its
// heap was not traced, so no check can tell what it lost: its verdict says
// so, rather than "0 bytes lost". --fail-on-leak fails on it, as on any
// check that could not be made, except for a Go program, to which a check
// of malloc's blocks does not apply.
func (s *session) noAllocator(pid int, when string) bool {
	t := s.targets[pid]
	if t == nil || t.malloc != "" {
		return false
	}
	r := &leakcheck.Verdict{PID: pid, Comm: comm(pid), When: when, Err: errNoAllocator}
	switch {
	case t.untraced:
		r.Err = errUntraced
	case t.goProgram:
		r.Err = errGoProgram
	}
	s.leaks().Judge.Judge(r, nil, nil)
	s.recordLeakCheck(r, nil)
	return true
}

var (
	errNoAllocator = errors.New("no allocator was probed in this process (resident memory only), so its heap was not traced")
	errUntraced    = errors.New("the process could not be traced (see the warning above), so its heap was not")
	errGoProgram   = fmt.Errorf("%w to a Go program: Go code allocates from its own garbage-collected heap, not with malloc "+
		"(memtrace shows its memory resident by function, its footprint and its Go heap mappings)", leakcheck.ErrDoesNotApply)
)

// runLeakCheck classifies pid's live blocks and keeps the result, in the
// recording too.
func (s *session) runLeakCheck(pid int, threads []leakcheck.Thread, regs []uint64, unknownHeap bool, when string) {
	start, cpu := time.Now(), cpuTime()
	r := &leakcheck.Verdict{PID: pid, Comm: comm(pid), When: when}
	r.Cwd, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	s.leaks().Judge.Verdicts[pid] = r
	// Every event up to the stop: the last frees matter.
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain before the leak check", "pid", pid, "err", err)
	}
	s.limitForLeakCheck(pid) // memory.go
	c, err := s.checkBlocks(r, threads, regs, unknownHeap)
	r.Err = err
	if err != nil {
		s.recordLeakCheck(r, nil)
		s.leaks().Judge.Judge(r, nil, nil)
		return
	}
	blocks := notPython(r, &c, s.table.PythonBlocks(uint32(pid)))
	s.recordLeakCheck(r, blocks)
	s.leaks().Judge.Judge(r, blocks, pipeline.LeakStacks{Stacks: s.detailStacks(), Res: s.res}.Of)
	r.Took = time.Since(start)
	// The CPU time too: on a busy machine the wall time says little.
	s.log.Info("leak check done", "pid", pid, "took", r.Took, "cpu", cpuTime()-cpu)
	if err := selfmem.Profile("leak-check"); err != nil { // MEMTRACE_MEMPROFILE
		s.log.Warn("heap profile", "err", err)
	}
}

// checkBlocks runs the check of r's process: its live blocks (and those it
// inherited), by address, each with its class.
func (s *session) checkBlocks(r *leakcheck.Verdict, threads []leakcheck.Thread, regs []uint64, unknownHeap bool) (pipeline.CheckedProcess, error) {
	pid := r.PID
	live := pipeline.LiveBlocks(s.table, &s.leaks().inherited, pid)
	c, err := pipeline.CheckBlocks(pid, live, threads, regs, unknownHeap, pipeline.Mapped(s.table, pid), s.cfg.Heuristics)
	if err != nil {
		return c, err
	}
	r.ScannedBytes = c.ScannedBytes
	s.log.Info("leak check", "pid", pid, "blocks", len(c.Blocks), "roots", c.Roots,
		"scanned", c.ScannedBytes, "skipped", c.SkippedBytes, "untouched", c.UntouchedBytes)
	return c, nil
}

// notPython leaves pymalloc's blocks (py) out of c's checked blocks,
// counting them in r: they were scanned, so what they point to is reached.
func notPython(r *leakcheck.Verdict, c *pipeline.CheckedProcess, py map[uint64]bool) iter.Seq[*recording.LeakBlock] {
	if len(py) == 0 {
		return c.Each
	}
	for _, b := range c.Blocks {
		if py[b.Addr] {
			r.PythonBytes += b.Size
			r.PythonBlocks++
		}
	}
	return func(yield func(*recording.LeakBlock) bool) {
		for b := range c.Each {
			if !py[b.Addr] && !yield(b) {
				return
			}
		}
	}
}

// recordLeakCheck writes a check's result (its blocks, nil when it failed)
// into the recording (--record), for a replay to judge again.
func (s *session) recordLeakCheck(r *leakcheck.Verdict, checked iter.Seq[*recording.LeakBlock]) {
	if s.time == nil || s.time.rec == nil {
		return
	}
	var blocks []recording.LeakBlock
	if checked != nil {
		for b := range checked {
			blocks = append(blocks, *b)
		}
	}
	s.time.rec.LeakCheck(pipeline.RecordedLeakCheck(r, blocks, monotonicNow()))
}

// detailStacks is the --detail stack source (nil without it).
func (s *session) detailStacks() report.StackSource {
	if !s.cfg.Detail {
		return nil
	}
	return s.stackSource()
}

// noteInherited keeps a forked child's inherited blocks in step with its
// events (leakcheck.Inherited).
func (s *session) noteInherited(e *event.Event) {
	if s.leak != nil {
		s.leak.inherited.Note(e)
	}
}

// leakStop handles the stops only -f produces: a new process (probes go on
// it before its first instruction) and the end of one. It reports whether
// it handled st.
func (s *session) leakStop(st launch.Stop) (bool, error) {
	switch st.Kind {
	case launch.Fork:
		return true, s.onFork(st)
	case launch.Ended:
		s.markExited(st.PID)
		return true, nil
	case launch.Exec:
		// A new program: the inherited blocks went with the old one.
		if s.leak != nil {
			s.leak.inherited.Drop(st.PID)
			delete(s.leak.vforked, st.PID)
		}
	}
	return false, nil
}

// onFork starts tracing a process forked by a traced one.
func (s *session) onFork(st launch.Stop) error {
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		return err
	}
	// It runs its parent's program until it execs: execs = 1 makes its
	// exec restart its statistics and probes as for any second program.
	t := &target{pid: st.PID, att: &tracer.Attachment{PID: st.PID}, execs: 1, stopsAtExec: true}
	s.targets[st.PID] = t
	if err := s.traceFaults(st.PID); err != nil { // resident.go
		s.log.Warn("follow: cannot sample the new process's faults", "pid", st.PID, "err", err)
	}
	mods, err := allocator.ForProcess(st.PID)
	if err == nil {
		err = s.attach(t, mods)
	}
	if err != nil {
		// Not worth ending the run for: it goes untraced.
		s.log.Warn("follow: cannot trace the new process", "pid", st.PID, "parent", st.Parent, "err", err)
		t.exited, t.reported, t.untraced = true, true, true
		return nil
	}
	if err := s.res.Capture(st.PID); err != nil {
		s.log.Warn("read mappings", "pid", st.PID, "err", err)
	}
	s.feed(pipeline.Input{Kind: pipeline.InProcess, PID: uint32(st.PID), Comm: comm(st.PID)})
	s.log.Info("follow: new process", "pid", st.PID, "parent", st.Parent)
	if st.SharedVM {
		// vfork: the parent's memory until exec; nothing of its own.
		s.leaks().vforked[st.PID] = true
		return nil
	}
	if s.cfg.LeakCheck {
		s.leaks().inherited.Fork(s.table, st.Parent, st.PID)
	}
	return nil
}

// leakExitCode is memtrace's status after the run (leakState.exitCode).
func (s *session) leakExitCode(code int) int {
	if s.leak == nil {
		return code
	}
	return s.leak.ExitCode(code, s.diag)
}

// cpuTime is the CPU time memtrace has used, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
