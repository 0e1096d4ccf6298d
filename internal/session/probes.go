package session

import (
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/python"
	"github.com/memtrace/memtrace/internal/tracer"
)

// The session reaches the kernel through three small interfaces: the ring
// it reads events from, the attacher that places probes, and the probes'
// per-process state it reads and prunes. tracer.Objects and
// tracer.Drainer are the real ones (kernelBackend); the tests give the
// loop synthetic events and record what it attached, with no root and no
// kernel (session_test.go).

// Ring is the ring reader: Poll hands fn every event written so far,
// waiting up to wait for the first one (tracer.Drainer.Poll).
type Ring interface {
	Poll(wait time.Duration, fn func(*event.Event)) (int, error)
}

// Attacher places probes and loads the unwind tables they need.
type Attacher interface {
	// Attach places probes on a process (a.PID; 0: every process).
	Attach(a *tracer.Attachment, probes []tracer.Placement) error
	// AttachHost attaches the whole host's exec and exit tracepoints.
	AttachHost() error
	// AttachFaults attaches the page-fault tracepoints (resident.go);
	// TraceFaults and UntraceFaults add and drop a process to sample.
	AttachFaults() error
	TraceFaults(pid uint32) error
	UntraceFaults(pid uint32)
	// PreloadTables loads, in the background, the unwind tables of pid's
	// code, then those of the files at paths; the channel is closed once
	// they are all in. PreloadTableFiles loads those of the files given.
	PreloadTables(pid int, paths []string) (tracer.Preload, error)
	PreloadTableFiles(paths []string)
	// SetPythonStacks, TracePython and UntracePython: which processes'
	// Python frames the probes read, with which layout, and whether they
	// keep code objects' tags (python.go).
	SetPythonStacks(m tracer.PythonStacks)
	TracePython(pid uint32, l *python.Layout, keepTags bool) error
	UntracePython(pid uint32)
}

// ProbeState is what the probes keep per process, which the session reads
// (counts, lost events, stacks) and prunes when a process execs or exits.
type ProbeState interface {
	Counts() (map[uint32]tracer.Counts, error)
	CountsOf(pid uint32) (tracer.Counts, bool)
	Lost() (map[uint32]uint64, uint64, error)
	LostOf(pid uint32) (uint64, bool)
	Stack(id int32) ([]uint64, bool)
	Forget(pid uint32, live []uint64)
	ForgetBlocks(pid uint32, addrs []uint64)
	ForgetStacks(pid uint32)
	Sweep(alive func(pid uint32) bool) int
	// Uncharge and MovePage keep the probes' sampled pages in step with
	// the table's (resident.go).
	Uncharge(pid uint32, addr uint64)
	MovePage(pid uint32, from, to uint64)
}

// Probes are the loaded probes: their attacher and their state.
type Probes interface {
	Attacher
	ProbeState
	// Kernel is what the kernel offers, as the probes were loaded for it.
	Kernel() tracer.Kernel
}

// Backend loads the probes with opts and opens their ring. close logs
// what the run cost (-v) and releases both.
type Backend interface {
	Load(opts tracer.Options, log *slog.Logger) (probes Probes, ring Ring, close func(), err error)
}

// kernelBackend is the real one: BPF objects in the running kernel.
type kernelBackend struct{}

func (kernelBackend) Load(opts tracer.Options, log *slog.Logger) (Probes, Ring, func(), error) {
	objs, err := tracer.Load(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	// Loading decoded the kernel's BTF and built the programs: ~10 MB of
	// garbage whose pages the runtime would keep, under the ring's pages
	// mapped next. Given back now (2-7 ms), they no longer add to
	// memtrace's peak (-- /bin/true: 65-70 MB rather than 72-78).
	debug.FreeOSMemory()
	d, err := objs.NewDrainer()
	if err != nil {
		objs.Close()
		return nil, nil, nil, err
	}
	start := time.Now()
	return objs, d, func() {
		tracer.LogRun(log, d, objs, start) // -v: events read, per second
		d.Close()
		objs.Close()
	}, nil
}
