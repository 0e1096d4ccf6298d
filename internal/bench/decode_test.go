package bench

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/memtrace/memtrace/internal/event"
)

// rawEvent mirrors struct event (bpf/memtrace.h), laid out as bpf2go
// generates it in tracer (memtraceEvent). It is a copy because tracer does
// not export its decoder; TestRawEventLayout keeps it honest against the C
// header's layout.
type rawEvent struct {
	Time     uint64
	Addr     uint64
	Size     uint64
	OldAddr  uint64
	OldSize  uint64
	CallSite uint64
	Leaf     uint64
	Pid      uint32
	Tid      uint32
	Kind     uint8
	Func     uint8
	Pad      [6]uint8
}

const recordSize = int(unsafe.Sizeof(rawEvent{}))

// decodeRecord is the decoding step of tracer.Drainer.Poll, copied: cast
// the record in place, copy the fields out.
func decodeRecord(b []byte, ev *event.Event) bool {
	if len(b) < recordSize {
		return false
	}
	raw := (*rawEvent)(unsafe.Pointer(&b[0]))
	*ev = event.Event{
		Time: raw.Time, Addr: raw.Addr, Size: raw.Size,
		OldAddr: raw.OldAddr, OldSize: raw.OldSize, CallSite: raw.CallSite, Leaf: raw.Leaf,
		PID: raw.Pid, TID: raw.Tid, Kind: event.Kind(raw.Kind), Func: event.Func(raw.Func),
	}
	return true
}

// encodeRecord writes e as the probes would (little-endian struct event),
// independently of rawEvent's layout.
func encodeRecord(b []byte, e event.Event) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], e.Time)
	le.PutUint64(b[8:], e.Addr)
	le.PutUint64(b[16:], e.Size)
	le.PutUint64(b[24:], e.OldAddr)
	le.PutUint64(b[32:], e.OldSize)
	le.PutUint64(b[40:], e.CallSite)
	le.PutUint64(b[48:], e.Leaf)
	le.PutUint32(b[56:], e.PID)
	le.PutUint32(b[60:], e.TID)
	b[64], b[65] = byte(e.Kind), byte(e.Func)
	clear(b[66:72])
}

func TestRawEventLayout(t *testing.T) {
	if recordSize != 72 {
		t.Fatalf("rawEvent is %d bytes, struct event is 72", recordSize)
	}
	want := event.Event{Time: 1, Addr: 2, Size: 3, OldAddr: 4, OldSize: 5, CallSite: 6, Leaf: 9,
		PID: 7, TID: 8, Kind: event.Realloc, Func: event.FuncRealloc}
	b := make([]byte, recordSize)
	encodeRecord(b, want)
	var got event.Event
	if !decodeRecord(b, &got) || !sameEvent(got, want) {
		t.Fatalf("round trip: got %+v, want %+v", got, want)
	}
	if decodeRecord(b[:71], &got) {
		t.Fatal("a 71-byte record decoded")
	}
}

// sameEvent compares the fields a stackless record carries.
func sameEvent(a, b event.Event) bool {
	a.Stack, b.Stack = nil, nil
	return a.Time == b.Time && a.Addr == b.Addr && a.Size == b.Size && a.OldAddr == b.OldAddr &&
		a.OldSize == b.OldSize && a.CallSite == b.CallSite && a.Leaf == b.Leaf && a.PID == b.PID &&
		a.TID == b.TID && a.Kind == b.Kind && a.Func == b.Func
}
