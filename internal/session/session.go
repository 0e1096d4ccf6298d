package session

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/diskcache"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/launch"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/residency"
	"github.com/memtrace/memtrace/internal/selfmem"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/tracer"
)

// pollWait bounds how stale a report can be: the probes do not wake the
// reader for each event, so it looks every pollWait.
const pollWait = 20 * time.Millisecond

type target struct {
	pid    int
	att    *tracer.Attachment
	exited bool
	// reported: its final records were printed when it exited.
	reported bool
	// execs counts the programs it has run.
	execs int
	comm  string
	// jvm: its JVM category probes are placed (jvm.go).
	jvm bool
	// perfMapAsked, perfMapBusy: the last --jvm-perfmap request made on
	// meeting unnamed JIT code, and whether one runs; perfMapReady: a
	// request was answered, so the JVM's attach listener runs (jvm.go).
	perfMapAsked time.Time
	perfMapBusy  atomic.Bool
	perfMapReady atomic.Bool
	// malloc is the module malloc binds to (footprint.go).
	malloc string
	// untraced: a followed child (-f) that could not be traced.
	untraced bool
	// goProgram: a Go program with no allocator to probe (leaks.go).
	goProgram bool
	// stopsAtExec: its execs stop it (a command, a followed child), so
	// its execve writes are held until then (execve.go).
	stopsAtExec bool
	// attached: when its probes went on (its last exec's); namedAhead:
	// its top sites were named while it ran (nameahead.go).
	attached   time.Time
	namedAhead bool
	// tables: the unwind tables preloaded at its attach (zero: none).
	tables tracer.Preload
}

// session is one run: it owns the table and is driven by one goroutine.
type session struct {
	cfg            *Config
	log            *slog.Logger
	out            io.Writer
	stdin          io.Reader
	stdout, stderr io.Writer // the terminal's, as the -- command gets them
	// stdoutText and diag are stdout and stderr for memtrace's own text,
	// escaped (textsafe.Writer); out is stdoutText or --output's file.
	stdoutText, diag io.Writer
	backend          Backend               // loads the probes and opens the ring (probes.go)
	hostPIDs         func() ([]int, error) // the processes running (host.PIDs)
	objs             Probes
	drain            Ring
	sigs             chan os.Signal // SIGINT and SIGTERM; the live view's q too (live.go)
	table            *aggregate.Table
	res              *symbolize.Resolver
	py               *pyState          // Python processes (python.go)
	pr               *pipeline.Printer // the reports (pipeline/printer.go)
	input            *pipeline.Loop    // the one loop the table's inputs go through (feed)
	sink             func(*pipeline.Input) error
	eventIn          pipeline.Input       // feedEvent's, reused
	stacks           *pipeline.StackStore // the stacks events name (pipeline/stacks.go)
	downloads        *pipeline.Downloads  // debuginfod; nil without servers (debuginfod.go)
	targets          map[int]*target
	exitedPIDs       chan int
	live             *liveRates               // decaying rates and --watch (live.go)
	leak             *leakState               // the leak check, -f (leaks.go)
	host             *hostState               // whole-host mode (host.go); nil with -p and --
	time             *timeState               // --record, --mark, --dump-dir (timeline.go)
	exports          *pipeline.Exports        // --pprof, --folded, --html, --listen (exports.go)
	resident         residency.Pacer          // when sampled pages are checked next (resident.go)
	footprints       *pipeline.FootprintPacer // paced readings, those at exit stops (footprint.go)
	access           *accessState             // --access (access.go)
	racing           *raceWatch               // a live resident check's drain (resident.go)
	execveHeld       map[uint32][]event.Event // execve's writes until their exec (execve.go)
	code             int                      // the run's exit code (Run)
	mem              *selfmem.Limiter         // the Go runtime's soft memory limit (memory.go)
}

// run is the live run: one loop for every mode. The ring's events and
// the targets' stops, exits and timers go through it into the table and
// the reports; the whole-host mode is a policy of it (host.go): which
// processes are probed, and that exited processes are reported in
// batches and forgotten.
func (s *session) run() (int, error) {
	defer s.downloads.Close()
	var adjust func(*tracer.Options)
	if s.cfg.Host() {
		s.host = s.newHost()      // no target: every process (host.go)
		s.pr.Others = s.addOthers // the processes it met no event of too (hostlist.go)
		adjust = s.hostOptions
	}
	// Ctrl-C or SIGTERM while the probes load and attach (seconds on a
	// busy machine) ends the run once it starts, with its final report.
	sigs := s.sigs
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := s.checkAccess(); err != nil { // access.go
		return 0, err
	}
	// Check the targets before loading anything, so a typo fails fast.
	for _, pid := range s.cfg.PIDs {
		if err := unix.Kill(pid, 0); err == unix.ESRCH {
			return 0, fmt.Errorf("process %d: %w", pid, allocator.ErrNoProcess)
		}
		if host.KernelThread(pid) {
			return 0, fmt.Errorf("process %d (%s) %w", pid, comm(pid), host.ErrKernelThread)
		}
	}
	var early *earlyCommand
	if s.host == nil && len(s.cfg.Command) > 0 {
		// Started while the probes load, it waits at its exec stop until
		// they are attached (command.go); killed there if the run fails
		// before the loop takes it.
		early = s.startEarly()
		defer early.abandon()
	}
	release, err := s.load(adjust)
	if err != nil {
		return 0, err
	}
	defer release()
	if err := s.startAccess(); err != nil { // access.go
		return 0, err
	}
	defer s.stopAccess()
	if s.cfg.ResidentBytes > 0 {
		s.table.OnUncharge(s.objs.Uncharge) // the probes tell refaults of charged pages only (resident.go)
		s.table.OnMove(s.objs.MovePage)
	}
	defer s.logMemory() // -v: memtrace's own memory, after all (memory.go)
	defer s.detachAll()
	if s.host == nil {
		// With -p and --; whole host, once exec and exit are attached (startHost).
		if err := s.startResident(); err != nil { // resident.go
			return 0, err
		}
	}
	stopExports, err := s.startExports() // --listen (exports.go)
	if err != nil {
		return 0, err
	}
	defer stopExports()

	var child *launch.Child
	switch {
	case s.host != nil:
		err = s.startHost() // host.go
	case len(s.cfg.Command) > 0:
		child, err = s.startCommand(early)
	default:
		err = s.attachTargets()
	}
	if err != nil {
		return 0, err
	}

	s.live = s.startLive(sigs) // may set cfg.Interval (--watch without a terminal)
	defer s.live.stop()
	raisePriority()
	return s.loop(child, sigs)
}

// startCommand takes the command started early, stopped at its exec
// (command.go).
func (s *session) startCommand(early *earlyCommand) (*launch.Child, error) {
	child, err := early.join(s.wakeRing())
	if err != nil {
		return nil, err
	}
	s.targets[child.PID] = &target{pid: child.PID, att: &tracer.Attachment{PID: child.PID}, stopsAtExec: true}
	if err := s.traceFaults(child.PID); err != nil { // resident.go
		return nil, err
	}
	return child, nil
}

// attachTargets attaches to the -p processes and watches for their exits.
func (s *session) attachTargets() error {
	for _, pid := range s.cfg.PIDs {
		if _, dup := s.targets[pid]; dup {
			continue
		}
		t := &target{pid: pid, att: &tracer.Attachment{PID: pid}}
		s.targets[pid] = t
		if err := s.attachRunning(t); err != nil { // its faults too
			return err
		}
		go s.watchExit(pid)
	}
	return nil
}

// loop reads the ring every poll and handles what happened meanwhile,
// until the targets are gone, the deadline passes or a signal comes. Each
// policy is a function of its own below: what a stop, an exit, the
// deadline and a signal do.
func (s *session) loop(child *launch.Child, sigs chan os.Signal) (int, error) {
	// -d counts from the moment tracing starts: a command's, once its
	// probes are attached at its exec.
	tick, deadline, stopTimers := s.runTimers(child == nil)
	atExec := child != nil && s.cfg.Duration > 0
	defer stopTimers()
	stops, done := commandEvents(child)
	sweep, stopSweep := s.sweepTimer()
	defer stopSweep()
	code := pipeline.ExitOK
	signals := 0
	for {
		if err := s.between(); err != nil {
			return 0, err
		}
		select {
		case st, ok := <-stops:
			if !ok {
				stops = nil
				break
			}
			if err := s.stopped(st); err != nil {
				return 0, err
			}
			if st.Kind == launch.Exec && atExec {
				deadline, atExec = s.startDeadline(), false
			}
		case ws := <-done:
			code, done = launch.ExitCode(ws), nil
			s.markExited(child.PID)
		case pid := <-s.exitedPIDs:
			s.targetExited(pid)
		case now := <-s.live.tick:
			s.live.onTick(now)
		case st := <-s.live.changes:
			s.live.apply(st)
		case <-tick:
			if err := s.report(false, nil); err != nil {
				return 0, err
			}
		case <-sweep:
			s.sweepHost()
		case <-deadline:
			deadline = nil
			if s.deadlinePassed(child) {
				return code, s.finish()
			}
		case sig := <-sigs:
			signals++
			if s.signalled(child, sig, signals) {
				return code, s.finish()
			}
		default:
		}
		if s.targetsGone(done) {
			// A command past its exit stop is still tearing down its
			// address space (node's: 20-50 ms): the report does not wait
			// for that, only memtrace's exit code does.
			err := s.finish()
			if done != nil {
				code = launch.ExitCode(<-done)
			}
			return code, err
		}
	}
}

// commandEvents are the command's stops and its exit (nil without one).
func commandEvents(child *launch.Child) (<-chan launch.Stop, <-chan syscall.WaitStatus) {
	if child == nil {
		return nil, nil
	}
	return child.Stops, child.Done
}

// targetsGone is the end of a run with targets: every one has exited (a
// command at its exit stop, or with its status read: done is nil). With
// -f the command's status is read first, as followed processes' last
// stops may come before it. The whole host never ends so.
func (s *session) targetsGone(done <-chan syscall.WaitStatus) bool {
	return s.host == nil && s.allExited() && (done == nil || !s.cfg.Follow)
}

// between runs before each turn of the loop: the ring is read (waiting up
// to a poll for the first event), then the whole host's scans and
// batches, and the resident check when due.
func (s *session) between() error {
	if _, err := s.drain.Poll(s.nextWait(), s.apply); err != nil {
		return err
	}
	s.mem.Update(0)                      // the live table grew or shrank (memory.go)
	if err := s.hostIdle(); err != nil { // scans, batches of exits (host.go)
		return err
	}
	s.checkResidentDue() // resident.go
	s.accessDue()        // access.go
	s.nameAheadDue()     // nameahead.go
	return nil
}

// stopped handles a stop of the command (or of a process it forked, -f),
// then lets it go on; an error kills it, as the run ends.
func (s *session) stopped(st launch.Stop) error {
	err := s.onStop(st)
	if err == nil {
		// The ring is read empty just before the command goes on: the
		// reader spreads its first events from here (tracer.Drainer.Poll).
		_, err = s.drain.Poll(0, s.apply)
	}
	if err != nil {
		// Killed before it is let go: resumed first, a loaded machine let
		// the command run on (TestRefused saw it write its file).
		syscall.Kill(st.PID, syscall.SIGKILL)
	}
	st.Resume()
	return err
}

// targetExited: a -p target exited while traced (watchExit).
func (s *session) targetExited(pid int) {
	if t := s.targets[pid]; t != nil {
		s.log.Warn("a target exited while traced: its final report follows", "pid", pid, "comm", t.comm)
	}
	s.markExited(pid)
}

// deadlinePassed is -d's policy: it ends a trace of running processes at
// once; a command is ended as timeout(1) would, and its exit ends the run.
func (s *session) deadlinePassed(child *launch.Child) (end bool) {
	if child == nil {
		return true
	}
	syscall.Kill(child.PID, syscall.SIGTERM)
	return false
}

// signalled is the policy of SIGINT and SIGTERM (n: how many came so far).
// They end a trace of running processes at once, with its final report. A
// command gets SIGTERM passed on (a terminal's Ctrl-C reaches it by
// itself), a second signal kills it, and its exit ends the run.
func (s *session) signalled(child *launch.Child, sig os.Signal, n int) (end bool) {
	if child == nil {
		return true
	}
	switch {
	case n > 1:
		syscall.Kill(child.PID, syscall.SIGKILL)
	case sig == syscall.SIGTERM:
		syscall.Kill(child.PID, syscall.SIGTERM)
	}
	return false
}

// sweepTimer ticks every host.SweepEvery in whole-host mode (sweepHost);
// nil otherwise.
func (s *session) sweepTimer() (<-chan time.Time, func()) {
	if s.host == nil {
		return nil, func() {}
	}
	t := time.NewTicker(host.SweepEvery)
	return t.C, t.Stop
}

// newState makes the table and symbolizer every run starts with.
func (s *session) newState() {
	s.table = aggregate.NewTable()
	s.table.SetSampleBytes(s.cfg.SampleBytes) // --sample-bytes (0 = exact)
	s.table.SetStackBreakdown(s.cfg.stacksAsBreakdown())
	s.downloads = pipeline.NewDownloads(s.cfg.SymbolizeConfig, s.log)
	s.res = symbolize.NewResolver(append(s.cfg.ResolverOptions(s.downloads.Client()), symbolize.WithLog(s.log))...)
	s.targets = map[int]*target{}
	s.exitedPIDs = make(chan int, 16)
	s.stacks = pipeline.NewStackStore()
	s.footprints = s.newFootprints()
	s.pr = &pipeline.Printer{Table: s.table, Res: s.res, HoldExits: s.cfg.Host(), Footprints: s.footprints.Read,
		Base: report.Options{Top: s.cfg.Top, Sort: s.cfg.Sort, Raw: s.cfg.Raw, Host: s.cfg.Host(),
			ResidentOnly: s.cfg.Host() && !s.cfg.Heap}}
	s.startTime() // the recording sees every input (timeline.go)
	s.input = &pipeline.Loop{Table: s.table, Printer: s.pr, Report: s.print}
}

// Run is the live run as a pipeline.Source: it gives feed every input of
// the table, in order (the ring's events, the targets' starts and exits,
// the probes' counts, ticks, marks, reports), until the run ends; the
// run's exit code is then s.code.
func (s *session) Run(feed func(*pipeline.Input) error) (err error) {
	s.sink = feed
	s.code, err = s.run()
	return err
}

// feed gives the loop one input. Only a report's can fail.
func (s *session) feed(in pipeline.Input) error { return s.sink(&in) }

// feedEvent gives the loop an event's input. It reuses one Input: feed's
// escapes to the heap, and an allocation per event (with the collections
// it brings) once cost more than the table's own work: 430 against 210 ns
// of memtrace's CPU per event, measured on mallocfree.
func (s *session) feedEvent(e *event.Event) {
	s.eventIn.Kind, s.eventIn.Event = pipeline.InEvent, e
	s.sink(&s.eventIn)
	s.eventIn.Event = nil
}

// load loads the BPF objects with the run's options (adjust, if set, adds
// a mode's own) and opens the ring reader; release closes both.
func (s *session) load(adjust func(*tracer.Options)) (release func(), err error) {
	opts := tracer.DefaultOptions()
	opts.RingBytes = s.cfg.RingBytes
	opts.SampleBytes = s.cfg.SampleBytes
	opts.ResidentBytes = s.cfg.ResidentBytes
	opts.FaultPIDs = !s.cfg.Host()
	if s.cfg.takesStacks() {
		opts.StackDepth = s.cfg.StackDepth
	}
	opts.Wraps = s.cfg.WrapperRule.Wraps
	opts.WrapsKey = s.cfg.WrapperRule.Key()
	opts.UnwindCache = s.openCache // tables kept across runs, opened once tracing may go on
	opts.Log = s.log
	if opts.WakeupBytes > opts.RingBytes/4 {
		opts.WakeupBytes = opts.RingBytes / 4
	}
	if adjust != nil {
		adjust(&opts)
	}
	objs, d, release, err := s.backend.Load(opts, s.log)
	if err != nil {
		return nil, err
	}
	s.limitMemory(opts) // memory.go
	free := release
	release = func() { s.mem.Stop(); free() }
	k := objs.Kernel()
	s.log.Info("kernel", "release", k.Release, "attach", k.Attach, "lacks", k.Lacks())
	s.objs, s.drain = objs, d
	s.pr.Base.Kernel, s.pr.Base.Attach = k.Release, string(k.Attach)
	s.pr.Base.SelfMemory = selfMemory{} // memory.go
	if s.cfg.Detail {
		s.pr.Base.Stacks = s.detailStacks()
	}
	s.recordStacks() // --record with stacks (timeline.go)
	return release, nil
}

// openCache opens the unwind tables' cache (--no-cache, --cache-size);
// nil when it is off or cannot be used (a warning says why).
func (s *session) openCache() *diskcache.Store {
	if s.cfg.NoCache {
		return nil
	}
	dir := diskcache.DefaultDir()
	if dir == "" {
		return nil
	}
	store, err := diskcache.Open(dir, s.cfg.CacheBytes, 1)
	if err != nil {
		s.log.Warn("unwind tables not cached", "err", err)
		return nil
	}
	return store
}

// apply accounts one event; a new code mapping (dlopen) makes it read the
// process's mappings at once, while the library is still there.
func (s *session) apply(e *event.Event) {
	if s.racing != nil {
		s.racing.saw(e) // before anything drops it (resident.go)
	}
	if s.holdExecve(e) { // until its exec has restarted the statistics (execve.go)
		return
	}
	s.applyEvent(e)
}

// applyEvent is apply past the events it holds.
func (s *session) applyEvent(e *event.Event) {
	if e.Kind == event.Refault && !s.table.Charged(e.PID, e.Addr, e.Size) {
		return // no sampled page there: another page of its slot (bpf/resident.h)
	}
	s.chargeJIT(e)                                 // past the runtime's own JIT code (jit.go)
	s.stacks.Learn(e.PID, e.StackID, s.objs.Stack) // before anything reads it (pipeline/stacks.go)
	s.exportEvent(e)                               // --html's history (exports.go)
	s.pythonEvent(e)                               // python.go
	if e.Kind == event.Exit || e.Kind == event.Exec {
		s.forgetPython(e.PID) // whole host: gone, or another program
	}
	if e.Kind == event.Mark {
		s.onMark(e) // timeline.go
		return
	}
	if s.host != nil {
		s.hostApply(e) // exec, exit, processes seen for the first time (host.go)
		s.exportApplied(e)
		return
	}
	if e.Kind == event.CodeMap {
		// The table first: it is built in the background, and the
		// library's code may allocate as soon as dlopen returns; until
		// its table is in, stacks stop at its frames (docs/unwinding.md).
		s.objs.PreloadTableFiles([]string{e.Path})
		if err := s.res.AddLibrary(int(e.PID), e.Path, e.Addr); err != nil {
			s.log.Info("dlopen'ed library", "pid", e.PID, "path", e.Path, "err", err)
		}
		s.jvmLoaded(e) // jvm.go
		return
	}
	s.noteInherited(e) // -f: a forked child's inherited blocks (leaks.go)
	s.feedEvent(e)
	s.exportApplied(e)
}

func (s *session) allExited() bool {
	for _, t := range s.targets {
		if !t.exited {
			return false
		}
	}
	return true
}

// onStop handles the command's exec and exit stops while it waits.
func (s *session) onStop(st launch.Stop) error {
	if handled, err := s.leakStop(st); handled { // -f: new and ended processes (leaks.go)
		return err
	}
	t := s.targets[st.PID]
	switch st.Kind {
	case launch.Exec:
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", st.PID))
		if err != nil {
			return fmt.Errorf("process %d: %w", st.PID, allocator.ErrNoProcess)
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", st.PID))
		// Everything it wrote before it stopped: the old program's
		// events, and execve's own writes, held (execve.go).
		if _, err := s.drain.Poll(0, s.apply); err != nil {
			return err
		}
		if t.execs > 0 {
			// exec replaced the whole address space: every block of the old
			// program is gone, so its statistics restart with the new one.
			s.objs.Forget(uint32(st.PID), s.table.LiveAddrs(uint32(st.PID))) // sampled blocks, counts
			s.feed(pipeline.Input{Kind: pipeline.InForget, PID: uint32(st.PID)})
			s.res.Forget(st.PID)
			s.footprints.Forget(st.PID)
			s.forgetPython(uint32(st.PID))
			s.accessForget(st.PID) // access.go
			// attach removes the probes the new program does not need.
			s.log.Info("exec: statistics restart", "pid", st.PID, "exe", exe)
		}
		s.releaseExecve(uint32(st.PID)) // the new program's (execve.go)
		t.execs++
		mods, err := execModules(exe, env) // command.go
		if err != nil {
			return err
		}
		if err := s.attach(t, mods); err != nil {
			return err
		}
		t.comm = comm(st.PID)
		s.feed(pipeline.Input{Kind: pipeline.InProcess, PID: uint32(st.PID), Comm: t.comm})
		// Its program's symbols are read while it runs, not at its exit,
		// where its leak check and report wait for them.
		if err := s.res.Capture(st.PID); err == nil {
			s.res.Prepare(st.PID)
		}
	case launch.Exit:
		// The last chance to read its mappings; then account everything it did.
		if err := s.res.Capture(st.PID); err != nil {
			s.log.Warn("read mappings at exit", "pid", st.PID, "err", err)
		}
		// Its memory is still mapped: resident figures as of its exit.
		if _, err := s.drain.Poll(0, s.apply); err != nil {
			return err
		}
		// Its pages as they were used, before anyone reads its memory.
		s.accessFinal(uint32(st.PID)) // access.go
		s.waitDebuginfoAtExit(st.PID) // for the leak check's names (debuginfod.go)
		s.readExitFootprint(st.PID)   // footprint.go
		// Its pages as of its exit (the resident header says so), before
		// the leak check reads its memory: a read of a released page maps
		// the zero page there, which pagemap shows present. Its exit is
		// timed before the check, not after the leak check's scan.
		exited := monotonicNow()
		s.nameAhead(uint32(st.PID)) // the report's first names, beside the check (nameahead.go)
		s.checkResidentOf(uint32(st.PID))
		s.leakCheckAtExit(st) // while its memory is still there (leaks.go)
		s.markExitedAt(st.PID, exited)
	}
	return nil
}

func (s *session) attachRunning(t *target) error {
	mods, err := allocator.ForProcess(t.pid)
	if err != nil {
		return err
	}
	// Mappings and name first: once attach logs "attached", a script may
	// let the target run on, and exit.
	if err := s.res.Capture(t.pid); err != nil {
		s.log.Warn("read mappings", "pid", t.pid, "err", err)
	}
	t.comm = comm(t.pid)
	if err := s.attach(t, mods); err != nil {
		return err
	}
	s.feed(pipeline.Input{Kind: pipeline.InProcess, PID: uint32(t.pid), Comm: t.comm})
	if s.cfg.JVMPerfMap && t.jvm {
		s.requestJVMPerfMap(t, jvmAttachWait) // its code compiled so far, named from the start (jvm.go)
	}
	return nil
}

func (s *session) attach(t *target, mods []allocator.Module) error {
	mods = withAllocator(s.cfg.Allocator, mods) // command.go
	// The unwind tables of its code (and of the libraries a command stopped
	// at exec will map), built in the background while its allocator is
	// bound (reading a big program's symbols takes as long as its cached
	// tables): the probes go on once the small files' tables are in (a
	// program, libc: exact charging from the first allocation), and after
	// TablesWait at most for the big ones'. Events before a file's table
	// is in are charged to the frame in that file (docs/unwinding.md,
	// "Before the tables").
	paths := make([]string, 0, len(mods))
	for _, m := range mods {
		paths = append(paths, m.Path)
	}
	start := time.Now()
	loaded, err := s.objs.PreloadTables(t.pid, paths)
	if err != nil {
		s.log.Warn("unwind tables", "pid", t.pid, "err", err)
	}
	probes, err := allocator.Bind(mods)
	if err != nil {
		// A program with no allocator to probe (Go, a static binary
		// without symbols) is still traced: who made its memory resident.
		if !errors.Is(err, allocator.ErrNotFound) || s.cfg.ResidentBytes == 0 {
			return fmt.Errorf("process %d: %w", t.pid, err)
		}
		if t.goProgram = footprint.GoProgram(t.pid); t.goProgram {
			// Nothing is wrong: Go code allocates from its own heap.
			s.log.Info("a Go program: memtrace shows its memory resident by function, its footprint and its Go heap mappings; "+
				"Go code does not call malloc, so there are no allocator call sites and no leak check", "pid", t.pid)
		} else {
			s.log.Warn("no allocator to probe, so only resident memory by function and the footprint are shown; "+
				"--allocator FILE names the file that defines malloc and free", "pid", t.pid, "err", err)
		}
	}
	t.malloc = allocator.MallocModule(probes)
	s.waitTables(t.pid, loaded, start)
	// A running target's faults are sampled from here (a command's and a
	// followed child's since their exec, stopped): after its small files'
	// tables, so that a fault in memset is charged to its caller from the
	// first (a page keeps its charge), and before "attached", which lets
	// a script run the target on.
	if err := s.traceFaults(t.pid); err != nil { // resident.go
		return err
	}
	probes = append(probes, s.markProbes(t.pid, mods)...) // --mark (timeline.go)
	jvm := s.jvmProbes(t.pid, mods)                       // the JVM's categories (jvm.go)
	t.jvm = len(jvm) > 0
	probes = append(probes, jvm...)
	placed := tracer.Place(probes)
	for _, p := range placed {
		s.log.Info("probe", "pid", t.pid, "function", p.Symbol, "module", p.Module,
			"offset", fmt.Sprintf("%#x", p.Offset), "at", fmt.Sprintf("+%d", p.Skip), "why", p.Why)
	}
	start = time.Now()
	// After an exec the new program may bind elsewhere (a preload, another
	// libc): probes left on the old allocator would count calls twice.
	if err := t.att.DetachStale(placed); err != nil {
		return fmt.Errorf("detach stale probes: %w", err)
	}
	if err := s.objs.Attach(t.att, placed); err != nil {
		return err
	}
	s.log.Info("attached", "pid", t.pid, "probes", len(placed), "took", time.Since(start))
	t.attached, t.namedAhead, t.tables = time.Now(), false, loaded
	return nil
}

// smallTablesBound bounds the wait for small files' tables: they take
// milliseconds, so only a machine in trouble ever reaches it.
const smallTablesBound = 30 * time.Second

// waitTables holds a target's probes until its small files' tables are
// in, then at most TablesWait for the rest; TablesWait 0 never waits.
func (s *session) waitTables(pid int, loaded tracer.Preload, start time.Time) {
	if s.cfg.TablesWait <= 0 {
		return
	}
	select {
	case <-loaded.Small:
	case <-time.After(smallTablesBound):
		s.log.Warn("unwind tables: not waiting longer for small files", "pid", pid, "waited", time.Since(start))
		return
	}
	select {
	case <-loaded.All:
	case <-time.After(s.cfg.TablesWait):
		s.log.Info("unwind tables: not waiting longer", "pid", pid, "waited", time.Since(start))
	}
}

// markExited accounts every event the process wrote before it went.
func (s *session) markExited(pid int) { s.markExitedAt(pid, monotonicNow()) }

// markExitedAt is markExited with the time of the exit.
func (s *session) markExitedAt(pid int, when uint64) {
	t := s.targets[pid]
	if t == nil || t.exited {
		return
	}
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		s.log.Warn("drain at exit", "pid", pid, "err", err)
	}
	t.exited = true
	s.dropExecve(uint32(pid))         // an exec it never completed (execve.go)
	s.objs.UntraceFaults(uint32(pid)) // its PID may be reused (resident.go)
	s.forgetPython(uint32(pid))
	s.feed(pipeline.Input{Kind: pipeline.InExited, PID: uint32(pid), Time: when})
	start := time.Now()
	_ = t.att.Release()
	s.log.Info("detached", "pid", pid, "took", time.Since(start))
	// With other targets still traced, its final records are due now.
	if !s.allExited() {
		t.reported = true
		if err := s.report(true, []int{pid}); err != nil {
			s.log.Warn("report", "pid", pid, "err", err)
		}
	}
}

func (s *session) detachAll() {
	for _, t := range s.targets {
		_ = t.att.Release()
	}
	if s.host != nil {
		_ = s.host.att.Release()
	}
}

// watchExit reports a running target's exit through a pidfd.
func (s *session) watchExit(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		s.exitedPIDs <- pid
		return
	}
	defer unix.Close(fd)
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err == unix.EINTR {
			continue
		}
		s.exitedPIDs <- pid
		return
	}
}

// finish drains what is left and prints the final report.
func (s *session) finish() error {
	if _, err := s.drain.Poll(0, s.apply); err != nil {
		return err
	}
	if s.cfg.ResidentBytes > 0 {
		s.checkResident() // resident.go
	}
	s.accessFinalAll()   // before the leak check reads their memory (access.go)
	s.leakCheckRunning() // -p targets, frozen for the check (leaks.go)
	s.waitDebuginfoAtEnd()
	if err := s.flushExits(); err != nil { // whole host: the last batch (host.go)
		return err
	}
	// Processes whose final records were printed at their exit are not
	// repeated; the whole-host mode's final report shows every process
	// still held.
	s.releaseBuffers()
	var final []int
	if s.host == nil {
		final = []int{}
		for pid, t := range s.targets {
			if !t.reported {
				final = append(final, pid)
			}
		}
	}
	if err := s.report(true, final); err != nil {
		return err
	}
	if err := s.printAccess(); err != nil { // access.go
		return err
	}
	return s.writeExports() // exports.go
}

// bufferReleaser is a ring that can give back the memory mapped from the
// kernel once the run's last events are read (tracer.Drainer).
type bufferReleaser interface{ ReleaseBuffers() error }

// releaseBuffers unmaps the ring and the refault slots before the final
// report when every target has exited: nothing more is read from them,
// and the report's symbols (a debug file's DWARF: ~10 MB for libc) then
// take memory in their place rather than on top of them (`-- /bin/true`
// peaked 11 MB higher when its report named libc). -p targets still
// running and the whole host keep writing: their ring stays drained.
func (s *session) releaseBuffers() {
	r, ok := s.drain.(bufferReleaser)
	if !ok || s.host != nil || !s.allExited() {
		return
	}
	if err := r.ReleaseBuffers(); err != nil {
		s.log.Warn("release ring", "err", err)
	}
}

// report prints a report of the given processes (nil = all): the
// probes' counts and the rates are brought up to now first, as inputs of
// the table, so that a replay's table holds them too (pipeline.Printer).
func (s *session) report(final bool, pids []int) error {
	if s.host != nil {
		// The processes that exited since the last report, once, just
		// before it (host.go).
		if err := s.flushExits(); err != nil {
			return err
		}
	}
	now := s.refresh() // exports.go
	r := recording.Report{Time: now, Final: final, All: pids == nil}
	for _, pid := range pids {
		r.PIDs = append(r.PIDs, uint32(pid))
	}
	if err := s.feed(pipeline.Input{Kind: pipeline.InReport, Report: r}); err != nil {
		return err
	}
	if !final && s.time.dumps != nil && s.access == nil {
		// An interval ends an epoch (dumps.go); with --access, the access
		// epochs do (access.go).
		return s.dump(false)
	}
	return nil
}

func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// stackSource is the run's --detail stack source (pipeline/stacks.go).
func (s *session) stackSource() pipeline.StackSource {
	return pipeline.StackSource{Store: s.stacks, Code: pipeline.CodeView{Resolver: s.res}, Depth: s.cfg.StackDepth}
}

// runTimers are the main loop's timers: the -i interval's reports (nil
// without -i) and the -d deadline (nil without -d, or unless now: the
// loop starts it later).
func (s *session) runTimers(now bool) (tick, deadline <-chan time.Time, stop func()) {
	stop = func() {}
	if s.cfg.Interval > 0 {
		t := time.NewTicker(s.cfg.Interval)
		tick, stop = t.C, t.Stop
	}
	if s.cfg.Duration > 0 && now {
		deadline = s.startDeadline()
	}
	return tick, deadline, stop
}

// startDeadline starts -d's time.
func (s *session) startDeadline() <-chan time.Time {
	s.log.Info("tracing", "for", s.cfg.Duration)
	return time.After(s.cfg.Duration)
}
