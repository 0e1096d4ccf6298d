package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/python"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/testwait"
	"github.com/memtrace/memtrace/internal/tracer"
)

// The session's kernel side, faked: a ring the test writes events into,
// and probes that record what the session attached and forgot. What the
// session reads from /proc it reads for real, from processes the test
// starts (no root needed for one's own children).

// fakeRing hands the session the events the test sends; released counts
// ReleaseBuffers calls. Wake ends a Poll's wait, as tracer.Drainer's does.
type fakeRing struct {
	events   chan *event.Event
	wake     chan struct{}
	released atomic.Int32
}

func (r *fakeRing) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *fakeRing) ReleaseBuffers() error {
	r.released.Add(1)
	return nil
}

func (r *fakeRing) Poll(wait time.Duration, fn func(*event.Event)) (int, error) {
	n := 0
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case e := <-r.events:
			fn(e)
			n++
		case <-t.C:
			return 0, nil
		case <-r.wake:
		}
	}
	for {
		select {
		case e := <-r.events:
			fn(e)
			n++
		default:
			return n, nil
		}
	}
}

// attachCall is one Attach: the process and the functions probed.
type attachCall struct {
	pid     int
	symbols []string
}

// fakeProbes records the session's calls; attachErr, if set, is what
// Attach returns.
type fakeProbes struct {
	mu        sync.Mutex
	attachErr error
	attached  []attachCall
	host      bool
	faultsOn  bool
	forgotten []uint32
	// lost is the events the ring lost, as Lost reports them.
	lost uint64
	// faults: the processes whose faults are sampled now.
	faults map[uint32]bool
}

func (p *fakeProbes) Attach(a *tracer.Attachment, probes []tracer.Placement) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attachErr != nil {
		return p.attachErr
	}
	c := attachCall{pid: a.PID}
	for _, pl := range probes {
		c.symbols = append(c.symbols, pl.Symbol)
	}
	p.attached = append(p.attached, c)
	return nil
}

func (p *fakeProbes) AttachHost() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.host = true
	return nil
}

func (p *fakeProbes) AttachFaults() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faultsOn = true
	return nil
}

func (p *fakeProbes) TraceFaults(pid uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.faults == nil {
		p.faults = map[uint32]bool{}
	}
	p.faults[pid] = true
	return nil
}

func (p *fakeProbes) UntraceFaults(pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.faults, pid)
}

// tracingFaults reports whether pid's faults are sampled, and whether
// the fault tracepoints are attached.
func (p *fakeProbes) tracingFaults(pid int) (pidOn, attached bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[uint32(pid)], p.faultsOn
}

// The rest keep nothing: no unwind tables, stacks, counts or pages.
func (p *fakeProbes) PreloadTables(int, []string) (tracer.Preload, error) {
	loaded := make(chan struct{})
	close(loaded)
	return tracer.Preload{Small: loaded, All: loaded}, nil
}
func (p *fakeProbes) PreloadTableFiles([]string)                     {}
func (p *fakeProbes) SetPythonStacks(tracer.PythonStacks)            {}
func (p *fakeProbes) TracePython(uint32, *python.Layout, bool) error { return nil }
func (p *fakeProbes) UntracePython(uint32)                           {}
func (p *fakeProbes) Stack(int32) ([]uint64, bool)                   { return nil, false }
func (p *fakeProbes) ForgetBlocks(uint32, []uint64)                  {}
func (p *fakeProbes) ForgetStacks(uint32)                            {}
func (p *fakeProbes) Sweep(func(pid uint32) bool) int                { return 0 }
func (p *fakeProbes) Uncharge(uint32, uint64)                        {}
func (p *fakeProbes) MovePage(uint32, uint64, uint64)                {}
func (p *fakeProbes) CountsOf(uint32) (tracer.Counts, bool) {
	return tracer.Counts{}, false
}
func (p *fakeProbes) Counts() (map[uint32]tracer.Counts, error) { return nil, nil }
func (p *fakeProbes) LostOf(uint32) (uint64, bool)              { return 0, false }

func (p *fakeProbes) Lost() (map[uint32]uint64, uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nil, p.lost, nil
}

func (p *fakeProbes) Forget(pid uint32, _ []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgotten = append(p.forgotten, pid)
}

func (p *fakeProbes) Kernel() tracer.Kernel {
	return tracer.Kernel{Release: "6.18.0-test", Attach: tracer.AttachMulti}
}

// calls is a copy of the Attach calls so far.
func (p *fakeProbes) calls() []attachCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]attachCall(nil), p.attached...)
}

func (p *fakeProbes) forgot() []uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint32(nil), p.forgotten...)
}

// fakeBackend loads fakeProbes and fakeRing, or fails with loadErr; with
// loading set, Load waits until it is closed.
type fakeBackend struct {
	probes  *fakeProbes
	ring    *fakeRing
	loadErr error
	loading chan struct{}

	mu     sync.Mutex
	loaded *tracer.Options
	closed bool
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{probes: &fakeProbes{}, ring: &fakeRing{events: make(chan *event.Event, 1024), wake: make(chan struct{}, 1)}}
}

func (b *fakeBackend) Load(opts tracer.Options, _ *slog.Logger) (Probes, Ring, func(), error) {
	if b.loading != nil {
		<-b.loading
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.loadErr != nil {
		return nil, nil, nil, b.loadErr
	}
	b.loaded = &opts
	return b.probes, b.ring, func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
	}, nil
}

// send writes events into the ring, as the probes would.
func (b *fakeBackend) send(events ...*event.Event) {
	for _, e := range events {
		b.ring.events <- e
	}
}

// syncBuffer is a buffer the session writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// liveRun is a session running in the background on a fakeBackend.
type liveRun struct {
	b            *fakeBackend
	s            *session
	stdout       *syncBuffer
	stderr       *syncBuffer
	code         chan int
	codeReceived *int
}

// testConfig is a Config as cmd/memtrace's defaults make it, with NDJSON
// reports and no downloads.
func testConfig() *Config {
	return &Config{
		Top: report.DefaultTop, JSON: true, RingBytes: 1 << 20, StackDepth: 16,
		RateConfig:      RateConfig{HalfLives: aggregate.DefaultHalfLives, Period: aggregate.DefaultPeriod},
		SymbolizeConfig: SymbolizeConfig{NoDebuginfod: true},
	}
}

// startRun starts a session with cfg on b. hostPIDs are the processes
// the whole-host mode finds running.
func startRun(t *testing.T, cfg *Config, b *fakeBackend, hostPIDs ...int) *liveRun {
	t.Helper()
	return startRunWith(t, cfg, b, strings.NewReader(""), hostPIDs...)
}

// pipe is a pipe, closed when the test ends: a command's standard input
// (r) and the test's end of it (w).
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// startRunWith is startRun with a command's standard input.
func startRunWith(t *testing.T, cfg *Config, b *fakeBackend, stdin io.Reader, hostPIDs ...int) *liveRun {
	t.Helper()
	r := &liveRun{b: b, stdout: &syncBuffer{}, stderr: &syncBuffer{}, code: make(chan int, 1)}
	r.s = &session{cfg: cfg, stdin: stdin, stdout: r.stdout, stderr: r.stderr,
		backend: b, sigs: make(chan os.Signal, 2),
		hostPIDs: func() ([]int, error) { return hostPIDs, nil }}
	go func() { r.code <- r.s.main([]string{"memtrace"}) }()
	return r
}

// wait returns the run's exit code once it ends.
func (r *liveRun) wait(t *testing.T) int {
	t.Helper()
	if r.codeReceived != nil {
		return *r.codeReceived
	}
	select {
	case c := <-r.code:
		r.codeReceived = &c
		return c
	case <-time.After(testwait.Limit):
		t.Fatalf("the run did not end; stderr:\n%s", r.stderr)
	}
	return 0
}

// signal delivers sig as signal.Notify would.
func (r *liveRun) signal(sig os.Signal) { r.s.sigs <- sig }

// waitFor polls cond until it holds (testwait.For).
func waitFor(t *testing.T, what string, cond func() bool) { testwait.For(t, what, cond) }

// waitAttached waits for an Attach on pid.
func (r *liveRun) waitAttached(t *testing.T, pid int) attachCall {
	t.Helper()
	var got attachCall
	waitFor(t, "the probes on the target", func() bool {
		for _, c := range r.b.probes.calls() {
			if c.pid == pid {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

// processRecord is the part of a "process" line the tests check.
type processRecord struct {
	Type           string `json:"type"`
	PID            int    `json:"pid"`
	Comm           string `json:"comm"`
	LiveBytes      uint64 `json:"live_bytes"`
	LiveAllocs     uint64 `json:"live_allocs"`
	Allocs         uint64 `json:"allocs"`
	AllocBytes     uint64 `json:"alloc_bytes"`
	Frees          uint64 `json:"frees"`
	UnmatchedFrees uint64 `json:"unmatched_frees"`
	Final          bool   `json:"final"`
	Exited         bool   `json:"exited"`
}

// processes are the "process" lines of NDJSON output.
func processes(t *testing.T, out string) []processRecord {
	t.Helper()
	var procs []processRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var p processRecord
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if p.Type == "process" {
			procs = append(procs, p)
		}
	}
	return procs
}

// lostEvents is the lost_events of the last "report" line.
func lostEvents(t *testing.T, out string) uint64 {
	t.Helper()
	var n uint64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Type       string `json:"type"`
			LostEvents uint64 `json:"lost_events"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.Type == "report" {
			n = r.LostEvents
		}
	}
	return n
}

// finals are the final records of each process, by PID.
func finals(t *testing.T, out string) map[int][]processRecord {
	t.Helper()
	m := map[int][]processRecord{}
	for _, p := range processes(t, out) {
		if p.Final {
			m[p.PID] = append(m[p.PID], p)
		}
	}
	return m
}

// startSleeper starts `sleep 60`, a target, once it has mapped its C
// library (before that, it has no allocator to attach to).
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	waitLibc(t, c.Process.Pid)
	return c
}

// waitLibc waits until pid has mapped the C library.
func waitLibc(t *testing.T, pid int) { testwait.Mapped(t, pid, "/libc.so") }

// alloc and free are synthetic events of pid, from one call site.
func alloc(pid int, addr, size uint64) *event.Event {
	return &event.Event{PID: uint32(pid), TID: uint32(pid), Kind: event.Alloc, Func: event.FuncMalloc,
		Addr: addr, Size: size, CallSite: 0x401000, StackID: -1, Time: monotonicNow()}
}

func free(pid int, addr uint64) *event.Event {
	return &event.Event{PID: uint32(pid), TID: uint32(pid), Kind: event.Free, Func: event.FuncFree,
		Addr: addr, StackID: -1, Time: monotonicNow()}
}
