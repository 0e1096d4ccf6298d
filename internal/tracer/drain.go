package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"math/bits"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/memtrace/memtrace/internal/event"
)

// ErrShortRecord: a ring-buffer record smaller than struct event.
var ErrShortRecord = errors.New("short ring buffer record")

// Drainer reads the ring buffer. One goroutine uses it.
type Drainer struct {
	objs *Objects
	rd   *ringbuf.Reader
	rec  ringbuf.Record
	ev   event.Event
	// frames is the reused buffer of the current event's stack, merged
	// its Python frames merged into it (Objects.SetPythonStacks).
	frames, merged []uint64
	// Short counts records too small to decode (never expected).
	Short uint64
	// Events counts the events handed over.
	Events uint64
	// last is when the reader last found the ring empty: the events read
	// next happened after it.
	last uint64
	// leftAt is the last handed event's time when a Poll stops with
	// events left in the ring; 0 otherwise.
	leftAt uint64
	// released: ReleaseBuffers unmapped the ring; Poll reads nothing.
	released bool
}

// NewDrainer opens a reader on the objects' ring buffer.
func (t *Objects) NewDrainer() (*Drainer, error) {
	rd, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		return nil, fmt.Errorf("open ring buffer reader: %w", err)
	}
	return &Drainer{objs: t, rd: rd, last: monotonicNS()}, nil
}

// Close unblocks a Poll in progress and releases the reader.
func (d *Drainer) Close() error {
	return d.rd.Close()
}

// ReleaseBuffers gives back the memory memtrace maps from the kernel, once
// the run's last events are read: the ring (the kernel maps all of its
// pages into the reader at once, twice over) and the refault slots. Both
// count in memtrace's resident set, so that the final report, whose symbol
// tables and debug files take memory of their own, would otherwise come on
// top of them. Poll reads nothing afterwards, and the probes' refault
// slots are no longer kept in step (Uncharge, MovePage).
func (d *Drainer) ReleaseBuffers() error {
	d.released = true
	return errors.Join(d.rd.Close(), d.objs.unmapRefault())
}

// Wake ends the wait of a Poll in progress, or else the next one's, once
// the events in the ring are handed over: something other than the ring
// needs its caller (a command stopped, waiting to be resumed). It may be
// called from any goroutine.
func (d *Drainer) Wake() {
	_ = d.rd.Flush() // closed: nothing waits
}

// MaxBatch bounds the events one waiting Poll hands over (as the
// OpenTelemetry profiler's maxEvents does): a ring that never empties
// would otherwise keep Poll reading forever, and its caller's ticks,
// signals, stops and deadline would go unserved. A variable for tests.
var MaxBatch = 1 << 16

// Poll waits up to wait for events (the probes wake the reader only when
// much data is pending), or until Wake, and then hands the events in the
// ring to fn, in order, returning when the ring is empty or MaxBatch
// events were handed over. wait <= 0 drains what the ring holds now without waiting, and
// no more: the callers that pass it (exec, exit, the end) need every event
// up to then, and a busy ring must not keep them there. fn must not keep
// the pointer.
func (d *Drainer) Poll(wait time.Duration, fn func(*event.Event)) (int, error) {
	if d.released {
		return 0, nil
	}
	d.rd.SetDeadline(time.Now().Add(wait))
	if d.objs.python != nil {
		d.objs.python.Batch() // code objects met again are checked again
	}
	// d.last becomes the time the ring was found empty; a poll that stops
	// with events left (the batch cap, a drain's budget) sets it to the
	// last event's time instead, so that the next batch's events are
	// spread from there, not squeezed after this return.
	defer func() {
		if d.leftAt != 0 {
			d.last, d.leftAt = d.leftAt, 0
		} else {
			d.last = monotonicNS()
		}
	}()
	n := 0
	// Bytes to read when draining: records are 8-byte aligned, after an 8-byte header.
	draining, budget := wait <= 0, d.rd.AvailableBytes()
	// The probes do not timestamp allocator events (it cost more than a
	// fifth of their work). The events of a batch happened between the
	// moment the ring was last seen empty (d.last) and the moment the
	// batch is read (stamp, once the wait is over): each gets a time in
	// between, in proportion to the bytes of the ring read up to it, so
	// that the events of a short run keep their order in time (see
	// spread). The clock is bpf_ktime_get_ns's.
	// Records that came while the batch was read (past its total bytes)
	// start a batch of their own, stamped then: under load a reader slow
	// enough for the ring to refill as it reads would otherwise give them
	// all one time (two marks at one moment).
	from := d.last
	var stamp, total, read uint64
	for {
		err := d.rd.ReadInto(&d.rec)
		if stamp == 0 || (err == nil && read >= total) {
			if stamp != 0 {
				from, read = stamp, 0
			}
			stamp = monotonicNS()
			total = uint64(d.rec.Remaining) + recordBytes(len(d.rec.RawSample))
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
				return n, nil
			}
			return n, fmt.Errorf("read ring buffer: %w", err)
		}
		rb := recordBytes(len(d.rec.RawSample))
		read += rb
		budget -= int(rb)
		// The compact records (struct site_event, struct free_event,
		// struct small_event): most events.
		switch len(d.rec.RawSample) {
		case int(unsafe.Sizeof(memtraceSiteEvent{})):
			raw := (*memtraceSiteEvent)(unsafe.Pointer(&d.rec.RawSample[0]))
			addr, kind, fun := untag(raw.Tagged)
			d.ev = event.Event{
				Time: spread(from, stamp, read, total), Addr: addr, Size: uint64(raw.Size),
				CallSite: raw.CallSite, Leaf: raw.CallSite,
				PID: raw.Pid, TID: raw.Tid, Kind: kind, Func: fun,
				StackID: -1, JVMCategory: raw.Flags >> eventCatShift & eventCatMask,
				NoTable: raw.Flags&eventNoTable != 0,
			}
			if d.hand(fn, &n, draining, budget) {
				return n, nil
			}
			continue
		case int(unsafe.Sizeof(memtraceSmallEvent{})):
			raw := (*memtraceSmallEvent)(unsafe.Pointer(&d.rec.RawSample[0]))
			d.ev = event.Event{
				Time: spread(from, stamp, read, total), Addr: raw.Addr, Size: raw.Size,
				CallSite: raw.CallSite, Leaf: raw.Leaf,
				PID: raw.Pid, TID: raw.Tid, Kind: event.Kind(raw.Kind), Func: event.Func(raw.Func),
				StackID: -1, JVMCategory: raw.Flags >> eventCatShift & eventCatMask,
				NoTable: raw.Flags&eventNoTable != 0,
			}
			if d.hand(fn, &n, draining, budget) {
				return n, nil
			}
			continue
		case int(unsafe.Sizeof(memtraceFreeEvent{})):
			raw := (*memtraceFreeEvent)(unsafe.Pointer(&d.rec.RawSample[0]))
			addr, kind, fun := untag(raw.Tagged)
			if kind == kindPyCodeFreed {
				// In the ring's order: after every event that ran it.
				if ps := d.objs.python; ps != nil {
					ps.CodeFreed(raw.Pid, addr)
				}
				continue
			}
			d.ev = event.Event{
				Time: spread(from, stamp, read, total), Addr: addr,
				PID: raw.Pid, TID: raw.Tid, Kind: kind, Func: fun,
				StackID: -1,
			}
			if d.hand(fn, &n, draining, budget) {
				return n, nil
			}
			continue
		}
		if len(d.rec.RawSample) < int(unsafe.Sizeof(memtraceEvent{})) {
			d.Short++
			continue
		}
		// The record is the C struct laid out for this host; see the size test.
		raw := (*memtraceEvent)(unsafe.Pointer(&d.rec.RawSample[0]))
		t := raw.Time
		if t == 0 {
			t = spread(from, stamp, read, total)
		}
		if raw.Kind == kindUnwindMiss {
			// A file the walk met has no table yet: build it aside, so
			// that draining goes on meanwhile.
			d.objs.tables.request(raw.Pid, raw.Addr, fileKey{Dev: raw.Size, Ino: raw.OldAddr})
			continue
		}
		d.ev = event.Event{
			Time: t, Addr: raw.Addr, Size: raw.Size,
			OldAddr: raw.OldAddr, OldSize: raw.OldSize, CallSite: raw.CallSite, Leaf: raw.Leaf,
			PID: raw.Pid, TID: raw.Tid, Kind: event.Kind(raw.Kind), Func: event.Func(raw.Func),
			StackID: -1, JVMCategory: raw.Flags >> eventCatShift & eventCatMask,
			NoTable: raw.Flags&eventNoTable != 0,
		}
		// Frames follow with --detail, without it when JIT code was
		// charged (JIT_FRAMES in bpf/), and Python frames in a Python
		// process (bpf/python.h).
		if rest := d.rec.RawSample[unsafe.Sizeof(memtraceEvent{}):]; len(rest) >= 8 && isSiteKind(d.ev.Kind) {
			d.decodeStack(raw, rest)
		}
		if (d.ev.Kind == event.CodeMap || d.ev.Kind == event.Mark) && len(d.rec.RawSample) >= int(unsafe.Sizeof(memtraceCodeEvent{})) {
			path := cString(d.rec.RawSample[unsafe.Sizeof(memtraceEvent{}):unsafe.Sizeof(memtraceCodeEvent{})])
			if d.ev.Kind == event.Mark {
				d.ev.Label = path // a mark's label travels as a code_event's path
			} else {
				d.ev.Path = path
			}
		}
		if (d.ev.Kind == event.Exec || d.ev.Kind == event.Exit) && len(d.rec.RawSample) >= int(unsafe.Sizeof(memtraceProcEvent{})) {
			d.ev.Comm = cString(d.rec.RawSample[unsafe.Sizeof(memtraceEvent{}):unsafe.Sizeof(memtraceProcEvent{})])
		}
		if d.ev.Kind == event.Exec && len(d.rec.RawSample) >= int(unsafe.Sizeof(memtraceExecEvent{})) {
			d.ev.Path, d.ev.Program = decodeExec((*memtraceExecEvent)(unsafe.Pointer(&d.rec.RawSample[0])))
		}
		if d.hand(fn, &n, draining, budget) {
			return n, nil
		}
	}
}

// decodeExec reads an exec record's program: its name and where it was
// loaded, its device re-encoded from the kernel's dev_t to stat(2)'s; none
// for a process the filters leave out (the probes fill in nothing).
func decodeExec(raw *memtraceExecEvent) (string, *event.Program) {
	if raw.EndCode == 0 {
		return "", nil
	}
	path := cString(unsafe.Slice((*byte)(unsafe.Pointer(&raw.Path[0])), len(raw.Path)))
	return path, &event.Program{Start: raw.StartCode, End: raw.EndCode, Dev: statDev(raw.Dev), Ino: raw.Ino, Size: raw.Size}
}

// cString is the NUL-terminated string b holds (all of b without a NUL).
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// statDev re-encodes the kernel's dev_t as stat(2) gives it.
func statDev(dev uint64) uint64 {
	return unix.Mkdev(uint32(dev>>kernelMinorBits), uint32(dev&(1<<kernelMinorBits-1)))
}

// kernelMinorBits: the kernel's dev_t keeps the minor number in its low 20
// bits (MINORBITS), unlike the encoding stat(2) returns.
const kernelMinorBits = 20

// hand gives the decoded event to fn and counts it; true when Poll is done.
func (d *Drainer) hand(fn func(*event.Event), n *int, draining bool, budget int) bool {
	t := d.ev.Time
	fn(&d.ev)
	*n++
	d.Events++
	// A drain stops once it has read what was there when it began.
	if draining {
		if budget <= 0 || d.rd.AvailableBytes() == 0 {
			if d.rd.AvailableBytes() > 0 {
				d.leftAt = t
			}
			return true
		}
		return false
	}
	if *n >= MaxBatch {
		d.leftAt = t // events are left: the ring was not empty
		return true
	}
	return false
}

// recordBytes is what a record of n bytes takes in the ring: an 8-byte
// header, rounded up to 8 bytes.
func recordBytes(n int) uint64 { return uint64(n+8+7) &^ 7 }

// untag splits a compact record's tagged address (bpf/memtrace.h's
// tag_addr): the address in the low 48 bits, the kind and the function
// above.
func untag(tagged uint64) (uint64, event.Kind, event.Func) {
	return tagged & (1<<tagAddrBits - 1), event.Kind(tagged >> tagAddrBits), event.Func(tagged >> (tagAddrBits + 8))
}

const tagAddrBits = memtraceTagAddrTAG_ADDR_BITS

// spread is the time of the event whose record ends read bytes into a
// batch of total bytes read at stamp, the ring having been empty at from:
// the events are taken to have come at an even pace in between. Records
// that came while the batch was read (read > total) get stamp.
func spread(from, stamp, read, total uint64) uint64 {
	if from >= stamp || total == 0 || read >= total {
		return stamp
	}
	span := stamp - from
	// span*read/total without overflow: spans are short, reads are < 4 GiB.
	hi, lo := bits.Mul64(span, read)
	q, _ := bits.Div64(hi, lo, total)
	return from + q
}

// kindUnwindMiss: the walk met a file without a table (KIND_UNWIND_MISS).
const kindUnwindMiss = uint8(memtraceEventKindKIND_UNWIND_MISS)

// kindPyCodeFreed: a Python code object whose tag the probes had read was
// freed (KIND_PY_CODE_FREED).
const kindPyCodeFreed = event.Kind(memtraceEventKindKIND_PY_CODE_FREED)

// isSiteKind reports whether records of kind carry a call site (and a stack).
func isSiteKind(k event.Kind) bool {
	switch k {
	case event.Alloc, event.Realloc, event.Mmap, event.Mremap, event.Fault:
		return true
	}
	return false
}

// decodeStack reads the frames after an allocation record: the leaf first,
// then its callers; the record's charged byte is the charged frame's index.
func (d *Drainer) decodeStack(raw *memtraceEvent, rest []byte) {
	n := len(rest) / 8
	d.frames = d.frames[:0]
	for i := 0; i < n; i++ {
		d.frames = append(d.frames, binary.NativeEndian.Uint64(rest[i*8:]))
	}
	// Python frames after the native ones: raw.StackId pairs (bpf/python.h).
	var py []uint64
	if raw.StackId > 0 && 2*int(raw.StackId) <= n {
		py = d.frames[n-2*int(raw.StackId):]
		d.frames = d.frames[:n-2*int(raw.StackId)]
	}
	charged := int(raw.Charged)
	if d.objs.stackDepth == 0 {
		// No stack is kept: a JIT frame's callers are there for the
		// charge only, Python's innermost frame charges.
		if charged < len(d.frames) {
			d.ev.Stack = d.frames[charged:]
			d.ev.StackComplete = raw.Flags&eventStackComplete != 0
		}
		if ps := d.objs.python; ps != nil && len(py) > 0 {
			d.ev.CallSite, _ = ps.Merge(raw.Pid, d.ev.CallSite, nil, py, nil)
		}
		return
	}
	if charged >= len(d.frames) {
		// The walk found the charged frame but could not keep it (never expected).
		return
	}
	d.ev.Stack = d.frames[charged:]
	if ps := d.objs.python; ps != nil && len(py) > 0 {
		d.ev.CallSite, d.merged = ps.Merge(raw.Pid, d.ev.CallSite, d.ev.Stack, py, d.merged)
		d.ev.Stack = d.merged
	}
	d.ev.StackComplete = raw.Flags&eventStackComplete != 0
	d.ev.StackID = d.objs.stacks.intern(raw.Pid, d.ev.Stack, d.ev.StackComplete)
}

// The bits of struct event's flags (enum event_flag, enum event_cat).
const (
	eventStackComplete = uint8(memtraceEventFlagEVENT_STACK_COMPLETE)
	eventNoTable       = uint8(memtraceEventFlagEVENT_NO_TABLE)
	eventCatShift      = uint8(memtraceEventCatEVENT_CAT_SHIFT)
	eventCatMask       = uint8(memtraceEventCatEVENT_CAT_MASK)
)

func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
