package session

import (
	"cmp"
	"fmt"
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
}

func (s *session) leaks() *leakState {
	if s.leak == nil {
		s.leak = &leakState{
			results:   map[int]*leakResult{},
			inherited: map[int]map[uint64]heldBlock{},
			printed:   map[int]bool{},
			vforked:   map[int]bool{},
		}
	}
	return s.leak
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
			s.leaks().results[pid] = &leakResult{pid: pid, comm: comm(pid), when: "when the run ended", err: err}
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

// runLeakCheck classifies pid's live blocks and keeps the result.
func (s *session) runLeakCheck(pid int, threads []leakcheck.Thread, regs []uint64, unknownHeap bool, when string) {
	start := time.Now()
	r := &leakResult{pid: pid, comm: comm(pid), when: when, sites: map[aggregate.SiteKey]*siteLeak{}}
	r.cwd, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	s.leaks().results[pid] = r
	// Every event up to the stop: the last frees matter.
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain before the leak check", "pid", pid, "err", err)
	}
	var blocks []leakcheck.Block
	var sites []aggregate.SiteKey
	s.table.ForEachLiveSite(uint32(pid), func(addr, size uint64, site aggregate.SiteKey) bool {
		blocks = append(blocks, leakcheck.Block{Addr: addr, Size: size})
		sites = append(sites, site)
		return true
	})
	for addr, h := range s.leaks().inherited[pid] {
		blocks = append(blocks, leakcheck.Block{Addr: addr, Size: h.size})
		sites = append(sites, h.site)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		r.err = err
		return
	}
	maps, err := leakcheck.ParseMaps(f)
	f.Close()
	if err != nil {
		r.err = err
		return
	}
	sorted := slices.Clone(blocks)
	slices.SortFunc(sorted, func(a, b leakcheck.Block) int { return cmp.Compare(a.Addr, b.Addr) })
	roots := leakcheck.Roots(maps, leakcheck.RootOptions{Threads: threads, UnknownHeap: unknownHeap, Blocks: sorted})
	mem := leakcheck.OpenProcessMemory(pid)
	defer mem.Close()
	res, err := leakcheck.Check(leakcheck.Input{
		Blocks: blocks, Mem: mem, Roots: roots, Registers: regs,
		Heuristics: s.cfg.Heuristics, Maps: maps,
		IgnoreInterior: leakcheck.GlibcChunkHeader,
	})
	if err != nil {
		r.err = err
		return
	}
	r.bytes = res.ScannedBytes
	s.classify(r, blocks, sites, res)
	r.took = time.Since(start)
	s.log.Info("leak check", "pid", pid, "blocks", len(blocks), "roots", len(roots),
		"scanned", res.ScannedBytes, "skipped", res.SkippedBytes, "took", r.took)
	if s.cfg.FailOnLeak && r.counted > s.cfg.FailBytes {
		s.leaks().over = append(s.leaks().over, r)
	}
}

// classify applies the suppressions and sums the classes per process and
// per site.
func (s *session) classify(r *leakResult, blocks []leakcheck.Block, sites []aggregate.SiteKey, res *leakcheck.Result) {
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
		f, tr := s.siteStack(r.pid, site)
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
	for i, b := range blocks {
		c := res.Class[i]
		k := key{sites[i], c}
		sup, seen := supp[k]
		if !seen {
			sup = s.cfg.Suppressions.Match(c, matchFrames(stackOf(sites[i])))
			supp[k] = sup
		}
		sl := r.sites[sites[i]]
		if sl == nil {
			sl = &siteLeak{}
			r.sites[sites[i]] = sl
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
		if h := res.Heuristic[i]; h != 0 && c == leakcheck.Reachable {
			if r.heuristic == nil {
				r.heuristic = map[leakcheck.Heuristic]*[2]uint64{}
			}
			if r.heuristic[h] == nil {
				r.heuristic[h] = &[2]uint64{}
			}
			r.heuristic[h][0] += b.Size
			r.heuristic[h][1]++
		}
		if s.cfg.LeakKinds.Has(c) {
			r.counted += b.Size
		}
		rk := recordKey{c, keyOf(sites[i])}
		lr := records[rk]
		if lr == nil {
			lr = &lossRecord{class: c, site: sites[i]}
			records[rk] = lr
		}
		lr.bytes += b.Size
		lr.blocks++
		lr.indirect += res.IndirectBytes[i]
	}
	for _, lr := range records {
		lr.frames, lr.truncated = stackOf(lr.site), truncated[lr.site]
		r.records = append(r.records, *lr)
	}
	// Largest first, then by class (definite first) and address, so the
	// order is stable.
	slices.SortFunc(r.records, func(a, b lossRecord) int {
		if c := cmp.Compare(b.bytes+b.indirect, a.bytes+a.indirect); c != 0 {
			return c
		}
		if c := cmp.Compare(b.class, a.class); c != 0 {
			return c
		}
		return cmp.Compare(a.site.Address, b.site.Address)
	})
}

// siteStack is a site's stack: the whole one with --detail, otherwise its
// call site alone.
func (s *session) siteStack(pid int, site aggregate.SiteKey) ([]symbolize.Frame, bool) {
	if s.cfg.Detail && s.objs != nil {
		src := stackSource{objs: s.objs, code: codeView{s.res}, depth: s.cfg.StackDepth}
		st := src.Stack(uint32(pid), aggregate.SiteSnapshot{Address: site.Address, StackID: site.StackID})
		if len(st.Frames) > 0 {
			return st.Frames, st.Truncated
		}
	}
	f := s.res.Resolve(pid, site.Address)
	if f.Address == 0 {
		f.Address = site.Address
	}
	return []symbolize.Frame{f}, s.cfg.Detail
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

// leakExitCode is memtrace's status: ExitLeak when a checked process lost
// more than --fail-on-leak allows, with a line on stderr for each.
// A check that could not run fails the run too (ExitError): --fail-on-leak
// must not pass a build it could not check.
func (s *session) leakExitCode(code int) int {
	if s.leak == nil || !s.cfg.FailOnLeak {
		return code
	}
	failed := false
	pids := make([]int, 0, len(s.leak.results))
	for pid := range s.leak.results {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		if r := s.leak.results[pid]; r.err != nil {
			fmt.Fprintf(s.stderr, "memtrace: pid %d %s: leak check failed: %v\n", r.pid, r.comm, r.err)
			failed = true
		}
	}
	for _, r := range s.leak.over {
		fmt.Fprintf(s.stderr, "memtrace: pid %d %s: %d bytes lost (%s) %s, more than --fail-on-leak=%d\n",
			r.pid, r.comm, r.counted, s.cfg.LeakKinds, r.when, s.cfg.FailBytes)
	}
	switch {
	case len(s.leak.over) > 0:
		return ExitLeak
	case failed:
		return ExitError
	}
	return code
}
