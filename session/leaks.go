package session

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/launch"
	"github.com/memtrace/memtrace/leakcheck"
	"github.com/memtrace/memtrace/recording"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/symbolize"
	"github.com/memtrace/memtrace/tracer"
)

// ExitLeak is memtrace's status when --fail-on-leak found more lost bytes
// than allowed (README.md, docs/ci.md). It replaces the command's own.
const ExitLeak = 10

// leakState is the leak check's part of a session: results per process,
// and the blocks forked children inherited from their parents.
type leakState struct {
	// cfg judges the results: suppressions, --leak-kinds, --fail-on-leak.
	cfg     *LeakConfig
	results map[int]*leakResult
	// inherited: with -f, a forked child starts with its parent's live
	// blocks (same addresses, same contents); they are blocks of the
	// child's heap for the check until the child frees them or execs.
	inherited map[int]map[uint64]heldBlock
	// printed: processes whose leak section was written.
	printed map[int]bool
	// vforked: children running in their parent's memory (vfork) until
	// they exec; one that exits first has no heap of its own to check.
	vforked map[int]bool
	// over: processes whose lost bytes exceeded --fail-on-leak's limit.
	over []*leakResult
}

type heldBlock struct {
	size uint64
	site aggregate.SiteKey
}

// leakResult is one process's check.
type leakResult struct {
	pid   int
	comm  string
	cwd   string // its working directory (to place relative source paths)
	when  string // "at exit", "when the run ended"
	err   error
	took  time.Duration
	bytes uint64 // scanned
	// totals exclude suppressed blocks, which supp counts.
	totals     leakcheck.Totals
	suppBytes  uint64
	suppBlocks uint64
	sites      map[aggregate.SiteKey]*siteLeak
	records    []lossRecord
	// counted: the bytes of the classes --leak-kinds counts.
	counted uint64
	// heuristic: the still reachable blocks only a heuristic reached, by
	// heuristic (valgrind's "of which reachable via heuristic").
	heuristic map[leakcheck.Heuristic]*[2]uint64
}

type siteLeak struct {
	totals                leakcheck.Totals
	suppBytes, suppBlocks uint64
}

// lossRecord groups the unsuppressed blocks of one class from one site, as
// valgrind's loss records do.
type lossRecord struct {
	class    leakcheck.Class
	site     aggregate.SiteKey
	bytes    uint64
	blocks   uint64
	indirect uint64 // definitely lost: the bytes lost through these blocks
	frames   []symbolize.Frame
	// truncated: the stack stops short of main (no frame pointers).
	truncated bool
	key       string // the stack as grouped (classify)
}

func (s *session) leaks() *leakState {
	if s.leak == nil {
		s.leak = newLeakState(&s.cfg.LeakConfig)
	}
	return s.leak
}

func newLeakState(cfg *LeakConfig) *leakState {
	return &leakState{
		cfg:       cfg,
		results:   map[int]*leakResult{},
		inherited: map[int]map[uint64]heldBlock{},
		printed:   map[int]bool{},
		vforked:   map[int]bool{},
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
	var threads []leakcheck.Thread
	var regs []uint64
	if st.Regs != nil {
		threads = []leakcheck.Thread{{SP: st.Regs.Rsp}}
		regs = gpRegs(st.Regs)
	}
	s.runLeakCheck(st.PID, threads, regs, false, "at exit")
	delete(s.leaks().inherited, st.PID)
}

// leakCheckRunning checks the -p targets still running when the run ends:
// each is frozen (every thread stopped) for the time of the check.
func (s *session) leakCheckRunning() {
	if !s.cfg.LeakCheck || len(s.cfg.Command) > 0 {
		return
	}
	for _, pid := range s.cfg.PIDs {
		t := s.targets[pid]
		if t == nil || t.exited || s.leaks().results[pid] != nil {
			continue
		}
		f, err := launch.Freeze(pid)
		if err != nil {
			r := &leakResult{pid: pid, comm: comm(pid), when: "when the run ended", err: err}
			s.leaks().results[pid] = r
			s.recordLeakCheck(r, nil)
			s.log.Warn("leak check: cannot stop the process", "pid", pid, "err", err)
			continue
		}
		var threads []leakcheck.Thread
		var regs []uint64
		for _, th := range f.Threads {
			threads = append(threads, leakcheck.Thread{SP: th.Regs.Rsp})
			regs = append(regs, gpRegs(&th.Regs)...)
		}
		// Blocks allocated before memtrace attached are unknown: the
		// heap outside the known blocks counts as roots.
		s.runLeakCheck(pid, threads, regs, true, "when the run ended")
		if err := f.Release(); err != nil {
			s.log.Warn("leak check: resume the process", "pid", pid, "err", err)
		}
	}
}

// gpRegs are the registers valgrind scans: the general-purpose ones.
func gpRegs(r *unix.PtraceRegs) []uint64 {
	return []uint64{r.Rax, r.Rbx, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Rbp, r.Rsp,
		r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15}
}

// runLeakCheck classifies pid's live blocks and keeps the result, in the
// recording too.
func (s *session) runLeakCheck(pid int, threads []leakcheck.Thread, regs []uint64, unknownHeap bool, when string) {
	start := time.Now()
	r := &leakResult{pid: pid, comm: comm(pid), when: when}
	r.cwd, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	s.leaks().results[pid] = r
	// Every event up to the stop: the last frees matter.
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain before the leak check", "pid", pid, "err", err)
	}
	blocks, err := s.checkBlocks(r, threads, regs, unknownHeap)
	r.err = err
	s.recordLeakCheck(r, blocks)
	if err != nil {
		return
	}
	s.leaks().judge(r, blocks, leakStacks{s.detailStacks(), s.res})
	r.took = time.Since(start)
	s.log.Info("leak check done", "pid", pid, "took", r.took)
}

// checkBlocks runs the check of r's process: its live blocks (and those it
// inherited), by address, each with its class.
func (s *session) checkBlocks(r *leakResult, threads []leakcheck.Thread, regs []uint64, unknownHeap bool) ([]recording.LeakBlock, error) {
	pid := r.pid
	var blocks []recording.LeakBlock
	s.table.ForEachLiveSite(uint32(pid), func(addr, size uint64, site aggregate.SiteKey) bool {
		blocks = append(blocks, recording.LeakBlock{Addr: addr, Size: size, Site: site})
		return true
	})
	for addr, h := range s.leaks().inherited[pid] {
		blocks = append(blocks, recording.LeakBlock{Addr: addr, Size: h.size, Site: h.site})
	}
	// By address: the order the recording keeps, so that a replay judges
	// the blocks in the same order.
	recording.SortLeakBlocks(blocks)
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	maps, err := leakcheck.ParseMaps(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	in := make([]leakcheck.Block, len(blocks))
	for i, b := range blocks {
		in[i] = leakcheck.Block{Addr: b.Addr, Size: b.Size}
	}
	roots := leakcheck.Roots(maps, leakcheck.RootOptions{Threads: threads, UnknownHeap: unknownHeap, Blocks: in})
	mem := leakcheck.OpenProcessMemory(pid)
	defer mem.Close()
	res, err := leakcheck.Check(leakcheck.Input{
		Blocks: in, Mem: mem, Roots: roots, Registers: regs,
		Heuristics: s.cfg.Heuristics, Maps: maps,
		IgnoreInterior: leakcheck.GlibcChunkHeader,
	})
	if err != nil {
		return nil, err
	}
	for i := range blocks {
		blocks[i].Class, blocks[i].Heuristic, blocks[i].Indirect = res.Class[i], res.Heuristic[i], res.IndirectBytes[i]
	}
	r.bytes = res.ScannedBytes
	s.log.Info("leak check", "pid", pid, "blocks", len(blocks), "roots", len(roots),
		"scanned", res.ScannedBytes, "skipped", res.SkippedBytes)
	return blocks, nil
}

// recordLeakCheck writes a check's result into the recording (--record),
// for a replay to judge again.
func (s *session) recordLeakCheck(r *leakResult, blocks []recording.LeakBlock) {
	if s.time == nil || s.time.rec == nil {
		return
	}
	c := recording.LeakCheck{PID: uint32(r.pid), Time: monotonicNow(), Comm: r.comm, When: r.when, Cwd: r.cwd,
		ScannedBytes: r.bytes, Blocks: blocks}
	if r.err != nil {
		c.Err = r.err.Error()
	}
	s.time.rec.LeakCheck(&c)
}

// judge applies the suppressions and --leak-kinds to a check's blocks
// (sorted by address): r's figures per process and per site, its loss
// records, and whether it fails --fail-on-leak.
func (l *leakState) judge(r *leakResult, blocks []recording.LeakBlock, stacks leakStacks) {
	r.sites = map[aggregate.SiteKey]*siteLeak{}
	l.classify(r, blocks, stacks)
	if l.cfg.FailOnLeak && r.counted > l.cfg.FailBytes {
		l.over = append(l.over, r)
	}
}

// classify applies the suppressions and sums the classes per process and
// per site.
func (l *leakState) classify(r *leakResult, blocks []recording.LeakBlock, stacks leakStacks) {
	type key struct {
		site  aggregate.SiteKey
		class leakcheck.Class
	}
	frames := map[aggregate.SiteKey][]symbolize.Frame{}
	truncated := map[aggregate.SiteKey]bool{}
	stackOf := func(site aggregate.SiteKey) []symbolize.Frame {
		if f, ok := frames[site]; ok {
			return f
		}
		f, tr := stacks.of(r.pid, site)
		frames[site], truncated[site] = f, tr
		return f
	}
	supp := map[key]*leakcheck.Suppression{}
	// Loss records group by the stack as checked and printed: two sites
	// whose raw stacks differ only past where the walk was cut are one.
	type recordKey struct {
		class leakcheck.Class
		stack string
	}
	records := map[recordKey]*lossRecord{}
	stackKey := map[aggregate.SiteKey]string{}
	keyOf := func(site aggregate.SiteKey) string {
		if k, ok := stackKey[site]; ok {
			return k
		}
		var b strings.Builder
		for _, f := range stackOf(site) {
			b.WriteString(strconv.FormatUint(f.Address, 16))
			b.WriteByte(' ')
		}
		if truncated[site] {
			b.WriteString("...")
		}
		stackKey[site] = b.String()
		return stackKey[site]
	}
	for i := range blocks {
		b := &blocks[i]
		c := b.Class
		k := key{b.Site, c}
		sup, seen := supp[k]
		if !seen {
			sup = l.cfg.Suppressions.Match(c, matchFrames(stackOf(b.Site)))
			supp[k] = sup
		}
		sl := r.sites[b.Site]
		if sl == nil {
			sl = &siteLeak{}
			r.sites[b.Site] = sl
		}
		if sup != nil {
			r.suppBytes += b.Size
			r.suppBlocks++
			sl.suppBytes += b.Size
			sl.suppBlocks++
			continue
		}
		r.totals.Add(c, b.Size)
		sl.totals.Add(c, b.Size)
		if h := b.Heuristic; h != 0 && c == leakcheck.Reachable {
			if r.heuristic == nil {
				r.heuristic = map[leakcheck.Heuristic]*[2]uint64{}
			}
			if r.heuristic[h] == nil {
				r.heuristic[h] = &[2]uint64{}
			}
			r.heuristic[h][0] += b.Size
			r.heuristic[h][1]++
		}
		if l.cfg.LeakKinds.Has(c) {
			r.counted += b.Size
		}
		rk := recordKey{c, keyOf(b.Site)}
		lr := records[rk]
		if lr == nil {
			lr = &lossRecord{class: c, site: b.Site, key: rk.stack}
			records[rk] = lr
		}
		lr.bytes += b.Size
		lr.blocks++
		lr.indirect += b.Indirect
	}
	for _, lr := range records {
		lr.frames, lr.truncated = stackOf(lr.site), truncated[lr.site]
		r.records = append(r.records, *lr)
	}
	// Largest first, then by class (definite first), address and stack,
	// so the order is the same in every run and replay.
	slices.SortFunc(r.records, func(a, b lossRecord) int {
		if c := cmp.Compare(b.bytes+b.indirect, a.bytes+a.indirect); c != 0 {
			return c
		}
		if c := cmp.Compare(b.class, a.class); c != 0 {
			return c
		}
		if c := cmp.Compare(a.site.Address, b.site.Address); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
}

// leakStacks gives the leak check each site's stack: the whole one with
// --detail (stacks set), otherwise its call site alone.
type leakStacks struct {
	stacks report.StackSource // nil without --detail
	res    *symbolize.Resolver
}

func (l leakStacks) of(pid int, site aggregate.SiteKey) ([]symbolize.Frame, bool) {
	if l.stacks != nil {
		st := l.stacks.Stack(uint32(pid), aggregate.SiteSnapshot{Address: site.Address, StackID: site.StackID})
		if len(st.Frames) > 0 {
			return st.Frames, st.Truncated
		}
	}
	f := l.res.Resolve(pid, site.Address)
	if f.Address == 0 {
		f.Address = site.Address
	}
	return []symbolize.Frame{f}, l.stacks != nil
}

// detailStacks is the --detail stack source (nil without it).
func (s *session) detailStacks() report.StackSource {
	if !s.cfg.Detail || s.objs == nil {
		return nil
	}
	return stackSource{objs: s.objs, code: codeView{s.res}, depth: s.cfg.StackDepth}
}

// matchFrames turns symbolized frames into what suppressions match.
func matchFrames(fs []symbolize.Frame) []leakcheck.Frame {
	out := make([]leakcheck.Frame, 0, len(fs))
	for _, f := range fs {
		lf := leakcheck.Frame{Function: f.Function, File: f.File, Module: f.Module}
		for _, in := range f.Inlined {
			lf.Inlined = append(lf.Inlined, leakcheck.InlinedFrame{Function: in.Function, File: in.File})
		}
		out = append(out, lf)
	}
	return out
}

// ProcessLeaks and SiteLeaks give the report the check's figures
// (report.LeakSource).
func (l *leakState) ProcessLeaks(pid uint32) (report.LeakFigures, bool) {
	r := l.results[int(pid)]
	if r == nil || r.err != nil {
		return report.LeakFigures{}, false
	}
	return figures(r.totals, r.suppBytes, r.suppBlocks), true
}

func (l *leakState) SiteLeaks(pid uint32, site aggregate.SiteKey) report.LeakFigures {
	r := l.results[int(pid)]
	if r == nil || r.err != nil || r.sites[site] == nil {
		return report.LeakFigures{}
	}
	sl := r.sites[site]
	return figures(sl.totals, sl.suppBytes, sl.suppBlocks)
}

func figures(t leakcheck.Totals, suppBytes, suppBlocks uint64) report.LeakFigures {
	return report.LeakFigures{
		DefinitelyLostBytes: t.Bytes[leakcheck.Definite], DefinitelyLostBlocks: t.Blocks[leakcheck.Definite],
		IndirectlyLostBytes: t.Bytes[leakcheck.Indirect], IndirectlyLostBlocks: t.Blocks[leakcheck.Indirect],
		PossiblyLostBytes: t.Bytes[leakcheck.Possible], PossiblyLostBlocks: t.Blocks[leakcheck.Possible],
		ReachableBytes: t.Bytes[leakcheck.Reachable], ReachableBlocks: t.Blocks[leakcheck.Reachable],
		SuppressedBytes: suppBytes, SuppressedBlocks: suppBlocks,
	}
}

// noteInherited keeps a forked child's inherited blocks in step with its
// frees (they are unmatched frees for the table, which never saw them
// allocated in the child).
func (s *session) noteInherited(e *event.Event) {
	if s.leak == nil || len(s.leak.inherited) == 0 {
		return
	}
	h := s.leak.inherited[int(e.PID)]
	if h == nil {
		return
	}
	switch e.Kind {
	case event.Free, event.Alloc:
		delete(h, e.Addr)
	case event.Realloc:
		if e.Addr != 0 || e.Size == 0 {
			delete(h, e.OldAddr)
		}
		delete(h, e.Addr)
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
			delete(s.leak.inherited, st.PID)
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
	t := &target{pid: st.PID, att: &tracer.Attachment{PID: st.PID}, execs: 1}
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
		t.exited, t.reported = true, true
		return nil
	}
	if err := s.res.Capture(st.PID); err != nil {
		s.log.Warn("read mappings", "pid", st.PID, "err", err)
	}
	s.table.AddProcess(uint32(st.PID), comm(st.PID))
	s.log.Info("follow: new process", "pid", st.PID, "parent", st.Parent)
	if st.SharedVM {
		// vfork: the parent's memory until exec; nothing of its own.
		s.leaks().vforked[st.PID] = true
		return nil
	}
	if s.cfg.LeakCheck {
		h := map[uint64]heldBlock{}
		s.table.ForEachLiveSite(uint32(st.Parent), func(addr, size uint64, site aggregate.SiteKey) bool {
			h[addr] = heldBlock{size, site}
			return true
		})
		for addr, b := range s.leaks().inherited[st.Parent] {
			h[addr] = b
		}
		if len(h) > 0 {
			s.leaks().inherited[st.PID] = h
		}
	}
	return nil
}

// leakExitCode is memtrace's status after the run (leakState.exitCode).
func (s *session) leakExitCode(code int) int {
	if s.leak == nil {
		return code
	}
	return s.leak.exitCode(code, s.stderr)
}

// exitCode is memtrace's status: ExitLeak when a checked process lost
// more than --fail-on-leak allows, with a line on stderr for each.
// A check that could not run fails the run too (ExitError): --fail-on-leak
// must not pass a build it could not check.
func (l *leakState) exitCode(code int, stderr io.Writer) int {
	if !l.cfg.FailOnLeak {
		return code
	}
	failed := false
	pids := make([]int, 0, len(l.results))
	for pid := range l.results {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		if r := l.results[pid]; r.err != nil {
			fmt.Fprintf(stderr, "memtrace: pid %d %s: leak check failed: %v\n", r.pid, r.comm, r.err)
			failed = true
		}
	}
	for _, r := range l.over {
		fmt.Fprintf(stderr, "memtrace: pid %d %s: %d bytes lost (%s) %s, more than --fail-on-leak=%d\n",
			r.pid, r.comm, r.counted, l.cfg.LeakKinds, r.when, l.cfg.FailBytes)
	}
	switch {
	case len(l.over) > 0:
		return ExitLeak
	case failed:
		return ExitError
	}
	return code
}
