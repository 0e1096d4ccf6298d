package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// Kind says what a Record holds.
type Kind uint8

const (
	// KindEvent: Event, for Table.Apply.
	KindEvent Kind = iota + 1
	// KindProcess: PID and Comm, for Table.AddProcess.
	KindProcess
	// KindExited: PID exited at Time.
	KindExited
	// KindForgot: Table.Forget(PID).
	KindForgot
	// KindLost: PID lost N events (absolute).
	KindLost
	// KindTotalLost: the run lost N events.
	KindTotalLost
	// KindSampleBytes: the sampling mean N.
	KindSampleBytes
	// KindExactCounts: PID made N allocation calls of M bytes.
	KindExactCounts
	// KindHalfLives: HalfLives from Time on.
	KindHalfLives
	// KindTick: a rates period ends at Time.
	KindTick
	// KindMark: Mark.
	KindMark
	// KindPeakTolerance: PeakTolerance.
	KindPeakTolerance
	// KindMaps: PID's code mappings are Maps.
	KindMaps
	// KindStack: the stack StackID is Frames.
	KindStack
	// KindLeakCheck: Leak, a process's leak check (PID and Time are its).
	KindLeakCheck
	// KindFootprint: Footprint, a reading of PID's memory at Time, whose
	// Ranges are the states of the tracked regions FootprintRanges.
	KindFootprint
	// KindReport: Report, a report the live run printed (Time is its).
	KindReport
	// KindListed: a process the next whole-host report lists though the
	// Table holds none of its events: PID, Comm and its Footprint read at
	// Time.
	KindListed
	// KindAccess: Access, an access statistics record of PID at Time.
	KindAccess
	// KindJIT: JIT symbols of PID, newer than those before (JIT).
	KindJIT
	// KindPyFrame: PyFrame, the Python frame that its Address stands for.
	KindPyFrame
)

// Record is one decoded record. Next reuses it: slices and strings are
// valid until the next call.
type Record struct {
	Kind          Kind
	Event         event.Event
	PID           uint32
	Comm          string
	Time          uint64
	N, M          uint64
	HalfLives     []time.Duration
	Mark          aggregate.Mark
	PeakTolerance aggregate.PeakTolerance
	Maps          []symbolize.CodeMapping
	StackID       int32
	Frames        []uint64
	PyFrame       symbolize.Frame
	Leak          LeakCheck
	// Footprint and FootprintRanges: a KindFootprint record's reading.
	Footprint       footprint.Reading
	FootprintRanges []footprint.Range
	Report          Report
	Access          Access
	JIT             []symbolize.RecordedJIT
}

// Reader reads a recording.
type Reader struct {
	info    Info
	version uint16
	file    io.Closer
	zr      *zstd.Decoder
	// buf[pos:] is decompressed data not yet decoded; eof: zr has no more.
	buf []byte
	pos int
	eof error
	err error

	pid, tid uint32
	time     uint64
	addr     uint64
	noTable  bool // a before-table record: the next event has NoTable
	sites    []recordedSite
	// Records counts the records read.
	Records uint64
}

// Open opens the recording at path.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.file = f
	return r, nil
}

// NewReader reads the header and the Info record from in.
func NewReader(in io.Reader) (*Reader, error) {
	hdr := make([]byte, headerLen)
	if _, err := io.ReadFull(in, hdr); err != nil || string(hdr[:len(Magic)]) != Magic {
		return nil, ErrNotRecording
	}
	v := binary.LittleEndian.Uint16(hdr[len(Magic):])
	if v < 1 || v > Version {
		return nil, fmt.Errorf("%w: %d (this memtrace reads versions 1 to %d)", ErrVersion, v, Version)
	}
	// Bounded: a corrupt frame header must not make it allocate gigabytes
	// (the writer's windows are 8 MiB at most).
	zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderMaxMemory(maxDecoded))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	r := &Reader{zr: zr, buf: make([]byte, 0, readChunk), version: v}
	tag, err := r.readByte()
	if err != nil {
		zr.Close()
		return nil, r.fail(err)
	}
	if tag != tagInfo {
		zr.Close()
		return nil, fmt.Errorf("%w: first record is not the run's info", ErrCorrupt)
	}
	js := r.str()
	if r.err != nil {
		zr.Close()
		return nil, r.err
	}
	if err := json.Unmarshal([]byte(js), &r.info); err != nil {
		zr.Close()
		return nil, fmt.Errorf("%w: info: %v", ErrCorrupt, err)
	}
	return r, nil
}

// Info describes the recorded run.
func (r *Reader) Info() Info { return r.info }

// Close releases the reader (and the file Open opened).
func (r *Reader) Close() error {
	r.zr.Close()
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}

// fail turns a read error into the reader's sticky error.
func (r *Reader) fail(err error) error {
	if r.err != nil {
		return r.err
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		r.err = fmt.Errorf("%w after %d records (was the run killed?)", ErrTruncated, r.Records)
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrTruncated):
		r.err = err
	default:
		r.err = fmt.Errorf("%w after %d records: %v", ErrCorrupt, r.Records, err)
	}
	return r.err
}

func (r *Reader) corrupt(what string) {
	r.fail(fmt.Errorf("%w after %d records: %s", ErrCorrupt, r.Records, what))
}

// maxWindow and maxDecoded bound the decoder's memory.
const (
	maxWindow  = 32 << 20
	maxDecoded = 1 << 40
)

// readChunk is how much decompressed data the reader asks for at a time.
const readChunk = 256 << 10

// maxRecordHead bounds a record's bytes other than strings and lists: a
// tag and at most eleven varints.
const maxRecordHead = 1 + 11*binary.MaxVarintLen64

// ensure makes at least n bytes available at buf[pos:], unless the stream
// ends first.
func (r *Reader) ensure(n int) {
	for len(r.buf)-r.pos < n && r.eof == nil {
		rest := copy(r.buf[:cap(r.buf)], r.buf[r.pos:])
		r.buf, r.pos = r.buf[:rest], 0
		if cap(r.buf)-rest < max(n, readChunk/2) {
			grown := make([]byte, rest, rest+max(n, readChunk))
			copy(grown, r.buf)
			r.buf = grown
		}
		m, err := r.zr.Read(r.buf[rest:cap(r.buf)])
		r.buf = r.buf[:rest+m]
		if err == nil && m == 0 {
			err = io.ErrNoProgress // a reader must not spin on empty reads
		}
		if err != nil {
			r.eof = err
		}
	}
}

// short fails the reader at the end of the available data.
func (r *Reader) short() {
	err := r.eof
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	r.fail(err)
}

func (r *Reader) readByte() (byte, error) {
	if r.pos >= len(r.buf) {
		r.ensure(1)
		if r.pos >= len(r.buf) {
			if r.eof == nil || r.eof == io.EOF {
				return 0, io.EOF
			}
			return 0, r.eof
		}
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

func (r *Reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.pos:])
	return r.consumed(v, n)
}

func (r *Reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.buf[r.pos:])
	return int64(r.consumed(uint64(v), n))
}

// consumed moves past a varint of n bytes (encoding/binary's n: 0 = too
// short, < 0 = overflow) and returns v, or 0 after recording the error.
func (r *Reader) consumed(v uint64, n int) uint64 {
	if n <= 0 {
		if n < 0 {
			r.corrupt("varint overflows 64 bits")
		} else {
			r.short()
		}
		return 0
	}
	r.pos += n
	return v
}

func (r *Reader) u32() uint32 {
	v := r.uvarint()
	if v > 1<<32-1 {
		r.corrupt("value out of range")
	}
	return uint32(v)
}

func (r *Reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > maxStringLength {
		r.corrupt("string too long")
		return ""
	}
	r.ensure(int(n) + maxRecordHead)
	if uint64(len(r.buf)-r.pos) < n {
		r.short()
		return ""
	}
	b := string(r.buf[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return b
}

func (r *Reader) count() int {
	n := r.uvarint()
	if n > maxListLength {
		r.corrupt("list too long")
		return 0
	}
	return int(n)
}

// Next reads the next record into rec. It returns io.EOF after the end
// record; an error matching ErrTruncated or ErrCorrupt when the rest of
// the file cannot be read (every record returned before is good).
func (r *Reader) Next(rec *Record) error {
	for {
		if r.err != nil {
			return r.err
		}
		r.ensure(maxRecordHead)
		tag, err := r.readByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // no end record
			}
			return r.fail(err)
		}
		if done, err := r.decode(tag, rec); done || err != nil {
			if err == nil {
				r.Records++
			}
			return err
		}
	}
}

// decode reads one record of tag; done is false for records that only
// change the decoder's state (pid, tid, time, sites).
func (r *Reader) decode(tag byte, rec *Record) (done bool, err error) {
	switch {
	case tag&^funcMask == tagAlloc:
		si := r.uvarint()
		size := r.uvarint()
		r.addr += uint64(r.varint())
		if r.err == nil && si >= uint64(len(r.sites)) {
			r.corrupt("undefined call site")
		}
		if r.err != nil {
			return false, r.err
		}
		s := r.sites[si]
		r.setEvent(rec, event.Event{Kind: event.Alloc, Func: event.Func(tag & funcMask), Addr: r.addr, Size: size,
			CallSite: s.addr, Leaf: s.leaf, StackID: s.stack})
		return true, nil
	case tag&^funcMask == tagRealloc:
		si := r.uvarint()
		size := r.uvarint()
		r.addr += uint64(r.varint())
		old := r.addr + uint64(r.varint())
		if r.err == nil && si >= uint64(len(r.sites)) {
			r.corrupt("undefined call site")
		}
		if r.err != nil {
			return false, r.err
		}
		s := r.sites[si]
		r.setEvent(rec, event.Event{Kind: event.Realloc, Func: event.Func(tag & funcMask), Addr: r.addr, Size: size,
			OldAddr: old, CallSite: s.addr, Leaf: s.leaf, StackID: s.stack})
		return true, nil
	}
	switch tag {
	case tagEnd:
		r.err = io.EOF
		return false, io.EOF
	case tagPID:
		r.pid = r.u32()
	case tagTID:
		r.tid = r.u32()
	case tagTime:
		r.time += uint64(r.varint())
	case tagBeforeTable:
		r.noTable = true
	case tagSite:
		addr := r.uvarint()
		stack := r.varint()
		if stack < -1<<31 || stack >= 1<<31 {
			r.corrupt("stack id out of range")
		}
		leaf := r.uvarint()
		r.sites = append(r.sites, recordedSite{addr, leaf, int32(stack)})
	case tagFree:
		r.addr += uint64(r.varint())
		r.setEvent(rec, event.Event{Kind: event.Free, Func: event.FuncFree, Addr: r.addr, StackID: -1})
		return true, r.err
	case tagEvent:
		kind, _ := r.readByte()
		fn, err := r.readByte()
		if err != nil {
			r.short()
			return false, r.err
		}
		e := event.Event{Kind: event.Kind(kind), Func: event.Func(fn)}
		e.Addr, e.Size, e.OldAddr, e.OldSize, e.CallSite = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		e.Leaf = r.uvarint()
		e.StackID = int32(r.varint())
		e.Path, e.Comm, e.Label = r.str(), r.str(), r.str()
		r.setEvent(rec, e)
		return true, r.err
	case tagProcess:
		*rec = Record{Kind: KindProcess, PID: r.u32(), Comm: r.str()}
		return true, r.err
	case tagExited:
		*rec = Record{Kind: KindExited, PID: r.u32(), Time: r.uvarint()}
		return true, r.err
	case tagForgot:
		*rec = Record{Kind: KindForgot, PID: r.u32()}
		return true, r.err
	case tagLost:
		*rec = Record{Kind: KindLost, PID: r.u32(), N: r.uvarint()}
		return true, r.err
	case tagTotalLost:
		*rec = Record{Kind: KindTotalLost, N: r.uvarint()}
		return true, r.err
	case tagSampleBytes:
		*rec = Record{Kind: KindSampleBytes, N: r.uvarint()}
		return true, r.err
	case tagExactCounts:
		*rec = Record{Kind: KindExactCounts, PID: r.u32(), N: r.uvarint(), M: r.uvarint()}
		return true, r.err
	case tagHalfLives:
		*rec = Record{Kind: KindHalfLives, Time: r.uvarint()}
		n := r.count()
		for range n {
			rec.HalfLives = append(rec.HalfLives, time.Duration(r.uvarint()))
		}
		return true, r.err
	case tagTick:
		*rec = Record{Kind: KindTick, Time: r.uvarint()}
		return true, r.err
	case tagMark:
		*rec = Record{Kind: KindMark}
		rec.Mark = aggregate.Mark{PID: r.u32(), Label: r.str(), Seq: r.uvarint(), Time: r.uvarint()}
		rec.PID, rec.Time = rec.Mark.PID, rec.Mark.Time
		return true, r.err
	case tagPeakTol:
		*rec = Record{Kind: KindPeakTolerance, PeakTolerance: aggregate.PeakTolerance{Bytes: r.uvarint(), PPM: r.uvarint()}}
		return true, r.err
	case tagMaps:
		*rec = Record{Kind: KindMaps, PID: r.u32()}
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			start := r.uvarint()
			m := symbolize.CodeMapping{Start: start, End: start + r.uvarint(), Offset: r.uvarint()}
			m.Path, m.BuildID = r.str(), r.str()
			rec.Maps = append(rec.Maps, m)
		}
		return true, r.err
	case tagPyFrame:
		addr := r.uvarint()
		f := symbolize.Frame{Address: addr, CallAddress: addr, Module: "python", Python: true}
		f.Function, f.File = r.str(), r.str()
		f.Line = int(r.uvarint())
		*rec = Record{Kind: KindPyFrame, PyFrame: f}
		return true, r.err
	case tagStack:
		*rec = Record{Kind: KindStack, StackID: int32(r.u32())}
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			r.ensure(binary.MaxVarintLen64) // a deep stack can outrun the record head
			rec.Frames = append(rec.Frames, r.uvarint())
		}
		return true, r.err
	case tagReport:
		r.decodeReport(rec)
		return true, r.err
	case tagLeakCheck:
		r.decodeLeakCheck(rec)
		return true, r.err
	case tagFootprint:
		r.decodeFootprint(rec)
		return true, r.err
	case tagListed:
		r.decodeListed(rec)
		return true, r.err
	case tagAccess:
		r.decodeAccess(rec)
		return true, r.err
	case tagJIT:
		r.decodeJIT(rec)
		return true, r.err
	default:
		r.corrupt(fmt.Sprintf("unknown record tag %#x", tag))
	}
	return false, r.err
}

// setEvent fills rec with e and the decoder's pid, tid and time.
func (r *Reader) setEvent(rec *Record, e event.Event) {
	e.PID, e.TID, e.Time = r.pid, r.tid, r.time
	e.NoTable, r.noTable = r.noTable, false
	rec.Kind = KindEvent
	rec.Event = e
}

// recordedSite is a call site record: the charged call site, the leaf
// call it was first seen with, and its stack id.
type recordedSite struct {
	addr, leaf uint64
	stack      int32
}
