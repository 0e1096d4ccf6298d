package recording

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// flushEvery bounds what a killed run loses: the compressed stream is
// flushed (a complete zstd block written out) at the first Tick this long
// after the previous flush, and at each mark.
const flushEvery = time.Second

// bufLimit: the encoded records are handed to the compressor in chunks of
// about this size.
const bufLimit = 64 << 10

// Writer writes a recording. Its Observer methods are called by the one
// goroutine that feeds the Table; MapsChanged may be called from any.
type Writer struct {
	file io.Closer // when Create opened it
	out  io.Writer
	peak *Peak // the peak hint (peak.go); nil: none
	zw   *zstd.Encoder
	buf  []byte
	err  error // the first write error; later writes do nothing

	// Delta-coding state, mirrored by the Reader.
	pid, tid  uint32
	time      uint64
	addr      uint64
	sites     map[siteKey]uint64
	lastSite  siteKey
	lastIndex uint64

	lastFlush uint64
	stacks    func(id int32) ([]uint64, error)
	stackSeen map[int32]bool
	// python names the Python frames memtrace numbered (SetPython);
	// pySeen: those written.
	python  func(addr uint64) (symbolize.Frame, bool)
	pySeen  map[uint64]bool
	mapsOf  func(pid int) []symbolize.CodeMapping
	written map[int][]symbolize.CodeMapping // the maps last written, by pid
	refresh func()
	jitOf   func(pid, from int) ([]symbolize.RecordedJIT, int)
	jitFrom map[int]int // JIT symbols written so far, by pid

	pendingMu sync.Mutex
	pending   []int
	hasMaps   atomic.Bool

	// Events counts the events written.
	Events uint64
}

type siteKey struct {
	addr  uint64
	stack int32
}

// Create creates the file at path and starts a recording in it.
func Create(path string, info Info) (*Writer, error) {
	f, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	w, err := NewWriter(f, info)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.file = f
	return w, nil
}

// NewWriter starts a recording on out: the header, then the Info record.
func NewWriter(out io.Writer, info Info) (*Writer, error) {
	hdr := make([]byte, headerLen)
	copy(hdr, Magic)
	binary.LittleEndian.PutUint16(hdr[len(Magic):], Version)
	if _, err := out.Write(hdr); err != nil {
		return nil, fmt.Errorf("write recording header: %w", err)
	}
	// One encoder goroutine: compression runs beside the reader of the
	// ring, not in its way, and leaves the other core to the traced program.
	zw, err := zstd.NewWriter(out, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		return nil, fmt.Errorf("start recording: %w", err)
	}
	w := &Writer{zw: zw, out: out, sites: map[siteKey]uint64{}, stackSeen: map[int32]bool{}, lastSite: siteKey{stack: -2}}
	if info.Memtrace == "" {
		info.Memtrace = "memtrace"
	}
	js, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode recording info: %w", err)
	}
	w.buf = append(w.buf, tagInfo)
	w.str(string(js))
	return w, nil
}

// SetStacks gives the Writer the stacks of --detail call sites: each
// stack is written once, when its first site is.
func (w *Writer) SetStacks(fn func(id int32) ([]uint64, error)) { w.stacks = fn }

// SetMaps gives the Writer the code mappings of a process, written after
// each MapsChanged.
func (w *Writer) SetMaps(fn func(pid int) []symbolize.CodeMapping) { w.mapsOf = fn }

// SetRefresh gives the Writer a function to call before each periodic
// flush, on the goroutine feeding the Table: the session captures its
// targets' mappings there, so that a killed run's prefix can still be
// symbolized.
func (w *Writer) SetRefresh(fn func()) { w.refresh = fn }

// MapsChanged says pid's code mappings changed (symbolize.Resolver's
// OnChange); they are written with the next record. Safe for concurrent use.
func (w *Writer) MapsChanged(pid int) {
	w.pendingMu.Lock()
	w.pending = append(w.pending, pid)
	w.pendingMu.Unlock()
	w.hasMaps.Store(true)
}

func (w *Writer) writeMaps() {
	w.hasMaps.Store(false)
	w.pendingMu.Lock()
	pids := w.pending
	w.pending = nil
	w.pendingMu.Unlock()
	if w.mapsOf == nil {
		return
	}
	done := map[int]bool{}
	for _, pid := range pids {
		if done[pid] {
			continue
		}
		done[pid] = true
		maps := w.mapsOf(pid)
		if slices.Equal(maps, w.written[pid]) {
			continue
		}
		if w.written == nil {
			w.written = map[int][]symbolize.CodeMapping{}
		}
		w.written[pid] = maps
		w.buf = append(w.buf, tagMaps)
		w.uvarint(uint64(pid))
		w.uvarint(uint64(len(maps)))
		for _, m := range maps {
			w.uvarint(m.Start)
			w.uvarint(m.End - m.Start)
			w.uvarint(m.Offset)
			w.str(m.Path)
			w.str(m.BuildID)
		}
	}
}

func (w *Writer) uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *Writer) varint(v int64)   { w.buf = binary.AppendVarint(w.buf, v) }

func (w *Writer) str(s string) {
	if len(s) > maxStringLength {
		s = s[:maxStringLength]
	}
	w.uvarint(uint64(len(s)))
	w.buf = append(w.buf, s...)
}

// record starts a record of tag, with pending maps first.
func (w *Writer) record(tag byte) {
	if w.hasMaps.Load() {
		w.writeMaps()
	}
	w.buf = append(w.buf, tag)
}

// done ends a record: a full buffer goes to the compressor.
func (w *Writer) done() {
	if len(w.buf) >= bufLimit {
		w.push()
	}
}

func (w *Writer) push() {
	if w.err == nil && len(w.buf) > 0 {
		if _, err := w.zw.Write(w.buf); err != nil {
			w.err = fmt.Errorf("write recording: %w", err)
		}
	}
	w.buf = w.buf[:0]
}

// Flush writes out everything recorded so far: a reader of the file (or
// of what is left of it after a crash) sees it all.
func (w *Writer) Flush() error {
	w.push()
	if w.err == nil {
		if err := w.zw.Flush(); err != nil {
			w.err = fmt.Errorf("flush recording: %w", err)
		}
	}
	return w.err
}

// Err returns the first error met while writing.
func (w *Writer) Err() error { return w.err }

// Close writes the end record, flushes and closes the file (if Create
// opened it). It returns the first error met while recording.
func (w *Writer) Close() error {
	if w.hasMaps.Load() {
		w.writeMaps()
	}
	w.writeJIT()
	w.buf = append(w.buf, tagEnd)
	w.push()
	if err := w.zw.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("close recording: %w", err)
	}
	if w.peak != nil && w.err == nil {
		if _, err := w.out.Write(appendPeakFrame(nil, *w.peak)); err != nil {
			w.err = fmt.Errorf("close recording: %w", err)
		}
	}
	if w.file != nil {
		if err := w.file.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("close recording: %w", err)
		}
	}
	return w.err
}

// defineStack writes the frames of stack once, before its first use.
func (w *Writer) defineStack(stack int32) {
	if stack < 0 || w.stacks == nil || w.stackSeen[stack] {
		return
	}
	w.stackSeen[stack] = true
	frames, _ := w.stacks(stack)
	for _, f := range frames {
		w.definePython(f)
	}
	w.buf = append(w.buf, tagStack)
	w.uvarint(uint64(stack))
	w.uvarint(uint64(len(frames)))
	for _, f := range frames {
		w.uvarint(f)
	}
}

// SetPython gives the Writer the Python frames' names (symbolize's
// Resolver.PythonFrameOf): each is written before the first site or stack
// that names it, so that a replay resolves it.
func (w *Writer) SetPython(fn func(addr uint64) (symbolize.Frame, bool)) { w.python = fn }

// definePython writes the Python frame addr stands for, if it is one not
// written yet.
func (w *Writer) definePython(addr uint64) {
	if w.python == nil || !symbolize.IsPython(addr) || w.pySeen[addr] {
		return
	}
	f, ok := w.python(addr)
	if !ok {
		return
	}
	if w.pySeen == nil {
		w.pySeen = map[uint64]bool{}
	}
	w.pySeen[addr] = true
	w.buf = append(w.buf, tagPyFrame)
	w.uvarint(addr)
	w.str(f.Function)
	w.str(f.File)
	w.uvarint(uint64(f.Line))
}

// site returns the index of (addr, stack), defining it first if new, with
// the leaf call site it is first seen with (aggregate keeps that one too).
func (w *Writer) site(addr, leaf uint64, stack int32) uint64 {
	k := siteKey{addr, stack}
	if k == w.lastSite {
		return w.lastIndex
	}
	i, ok := w.sites[k]
	if !ok {
		w.defineStack(stack)
		w.definePython(addr)
		i = uint64(len(w.sites))
		w.sites[k] = i
		w.buf = append(w.buf, tagSite)
		w.uvarint(addr)
		w.varint(int64(stack))
		w.uvarint(leaf)
	}
	w.lastSite, w.lastIndex = k, i
	return i
}

// Event implements aggregate.Observer.
func (w *Writer) Event(e *event.Event) {
	if w.hasMaps.Load() {
		w.writeMaps()
	}
	w.Events++
	if e.PID != w.pid {
		w.pid = e.PID
		w.buf = append(w.buf, tagPID)
		w.uvarint(uint64(e.PID))
	}
	if e.TID != w.tid {
		w.tid = e.TID
		w.buf = append(w.buf, tagTID)
		w.uvarint(uint64(e.TID))
	}
	if e.Time != w.time {
		w.buf = append(w.buf, tagTime)
		w.varint(int64(e.Time - w.time))
		w.time = e.Time
	}
	if e.NoTable {
		// Rare (a file's first events, before its unwind table is in),
		// so a record of its own rather than a field in every event.
		w.buf = append(w.buf, tagBeforeTable)
	}
	switch {
	case e.Kind == event.Alloc && e.Func <= funcMask:
		si := w.site(e.CallSite, e.Leaf, e.StackID)
		w.buf = append(w.buf, tagAlloc|byte(e.Func))
		w.uvarint(si)
		w.uvarint(e.Size)
		w.varint(int64(e.Addr - w.addr))
		w.addr = e.Addr
	case e.Kind == event.Free:
		w.buf = append(w.buf, tagFree)
		w.varint(int64(e.Addr - w.addr))
		w.addr = e.Addr
	case e.Kind == event.Realloc && e.Func <= funcMask:
		si := w.site(e.CallSite, e.Leaf, e.StackID)
		w.buf = append(w.buf, tagRealloc|byte(e.Func))
		w.uvarint(si)
		w.uvarint(e.Size)
		w.varint(int64(e.Addr - w.addr))
		w.varint(int64(e.OldAddr - e.Addr))
		w.addr = e.Addr
	default:
		w.defineStack(e.StackID) // a fault's or a mapping's stack
		w.definePython(e.CallSite)
		w.buf = append(w.buf, tagEvent, byte(e.Kind), byte(e.Func))
		w.uvarint(e.Addr)
		w.uvarint(e.Size)
		w.uvarint(e.OldAddr)
		w.uvarint(e.OldSize)
		w.uvarint(e.CallSite)
		w.uvarint(e.Leaf)
		w.varint(int64(e.StackID))
		w.str(e.Path)
		w.str(e.Comm)
		w.str(e.Label)
	}
	w.done()
}

// Process implements aggregate.Observer.
func (w *Writer) Process(pid uint32, comm string) {
	w.record(tagProcess)
	w.uvarint(uint64(pid))
	w.str(comm)
	w.done()
}

// Exited implements aggregate.Observer.
func (w *Writer) Exited(pid uint32, when uint64) {
	w.record(tagExited)
	w.uvarint(uint64(pid))
	w.uvarint(when)
	w.done()
}

// Forgot implements aggregate.Observer.
func (w *Writer) Forgot(pid uint32) {
	w.record(tagForgot)
	w.uvarint(uint64(pid))
	w.done()
}

// Lost implements aggregate.Observer.
func (w *Writer) Lost(pid uint32, n uint64) {
	w.record(tagLost)
	w.uvarint(uint64(pid))
	w.uvarint(n)
	w.done()
}

// TotalLost implements aggregate.Observer.
func (w *Writer) TotalLost(n uint64) {
	w.record(tagTotalLost)
	w.uvarint(n)
	w.done()
}

// SampleBytes implements aggregate.Observer.
func (w *Writer) SampleBytes(n uint64) {
	w.record(tagSampleBytes)
	w.uvarint(n)
	w.done()
}

// ExactCounts implements aggregate.Observer.
func (w *Writer) ExactCounts(pid uint32, allocs, allocBytes uint64) {
	w.record(tagExactCounts)
	w.uvarint(uint64(pid))
	w.uvarint(allocs)
	w.uvarint(allocBytes)
	w.done()
}

// HalfLives implements aggregate.Observer.
func (w *Writer) HalfLives(halfLives []time.Duration, now uint64) {
	w.record(tagHalfLives)
	w.uvarint(now)
	w.uvarint(uint64(len(halfLives)))
	for _, h := range halfLives {
		w.uvarint(uint64(h))
	}
	w.done()
}

// Tick implements aggregate.Observer. It also flushes the stream once a
// second.
func (w *Writer) Tick(now uint64) {
	if now-w.lastFlush >= uint64(flushEvery) {
		w.lastFlush = now
		if w.refresh != nil {
			w.refresh()
		}
		w.writeJIT()
		w.record(tagTick)
		w.uvarint(now)
		w.Flush()
		return
	}
	w.record(tagTick)
	w.uvarint(now)
	w.done()
}

// Mark implements aggregate.Observer; a mark is flushed at once.
func (w *Writer) Mark(m aggregate.Mark) {
	w.record(tagMark)
	w.uvarint(uint64(m.PID))
	w.str(m.Label)
	w.uvarint(m.Seq)
	w.uvarint(m.Time)
	w.Flush()
}

// PeakTolerance implements aggregate.Observer.
func (w *Writer) PeakTolerance(t aggregate.PeakTolerance) {
	w.record(tagPeakTol)
	w.uvarint(t.Bytes)
	w.uvarint(t.PPM)
	w.done()
}

var _ aggregate.Observer = (*Writer)(nil)
