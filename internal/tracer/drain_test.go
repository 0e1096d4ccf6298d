package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/testwait"
)

// TestPollUnderFlood: while the ring is written faster than it is read, a
// waiting Poll still returns after MaxBatch events, and a drain (wait 0)
// after what the ring held when it began: the session loop's ticks,
// signals and deadline are served under any load.
func TestPollUnderFlood(t *testing.T) {
	o := DefaultOptions()
	o.RingBytes = 1 << 20
	objs, d := loadDrainer(t, o)
	// A struct event of kind alloc, written to the ring once a run.
	rec := make([]byte, 72)
	rec[64] = byte(event.Alloc)
	fill := recordProgram(t, objs, rec)
	defer busy(2, func() bool {
		if _, err := fill.Run(&ebpf.RunOptions{Data: make([]byte, 64), Repeat: 1 << 16}); err != nil {
			t.Error(err)
			return false
		}
		return true
	})()
	// The ring full, or nearly (records of 72 + 8 bytes do not fill it to
	// the byte).
	testwait.For(t, "the ring full", func() bool { return d.rd.AvailableBytes() > o.RingBytes-4096 })
	defer func(m int) { MaxBatch = m }(MaxBatch)
	MaxBatch = 1000
	// A consumer slower than the probes (20 µs an event): the ring never empties.
	slow := func(*event.Event) {
		for s := time.Now(); time.Since(s) < 20*time.Microsecond; {
		}
	}

	capacity := o.RingBytes / (72 + 8)
	for _, tc := range []struct {
		name string
		wait time.Duration
		most int
	}{
		{"wait", 20 * time.Millisecond, MaxBatch},
		{"drain", 0, capacity + 1}, // what it held when it began
	} {
		done := make(chan int, 1)
		go func() {
			n, err := d.Poll(tc.wait, slow)
			if err != nil {
				t.Error(err)
			}
			done <- n
		}()
		select {
		case n := <-done:
			if n == 0 || n > tc.most {
				t.Errorf("%s: %d events, want 1 to %d", tc.name, n, tc.most)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Poll still reading after 30 s of flood", tc.name)
		}
	}

	// A poll stopped by the cap leaves events in the ring: the next
	// batch's are spread from the last event handed over, not from the
	// moment the capped poll returned (the ring was not empty then).
	var last, first uint64
	if _, err := d.Poll(20*time.Millisecond, func(e *event.Event) { slow(e); last = e.Time }); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Poll(20*time.Millisecond, func(e *event.Event) {
		if first == 0 {
			first = e.Time
		}
	}); err != nil {
		t.Fatal(err)
	}
	// The capped poll took >= 20 ms (MaxBatch slow events); the next
	// batch's first event is a few µs past the last one, not 20 ms.
	if first < last || first-last > uint64(5*time.Millisecond) {
		t.Errorf("after a capped poll: next batch starts %d ns after the last event, want 0 to 5 ms", int64(first-last))
	}

	// A poll that reads past what the ring held at its stamp (the ring
	// refilled meanwhile) spreads those records from that stamp to a new
	// one: they once all got one time, and two marks among them were at
	// one moment. Times keep their order and hardly repeat.
	MaxBatch = 3 * capacity
	var times []uint64
	if _, err := d.Poll(20*time.Millisecond, func(e *event.Event) {
		for s := time.Now(); time.Since(s) < time.Microsecond; {
		}
		times = append(times, e.Time)
	}); err != nil {
		t.Fatal(err)
	}
	if len(times) <= capacity {
		t.Fatalf("%d events read, want more than the ring holds (%d): the flood stopped?", len(times), capacity)
	}
	same := map[uint64]int{}
	for i, tm := range times {
		if i > 0 && tm < times[i-1] {
			t.Fatalf("event %d at %d, before event %d at %d", i, tm, i-1, times[i-1])
		}
		same[tm]++
	}
	for tm, n := range same {
		if n > 10 {
			t.Errorf("%d of %d events at one time %d", n, len(times), tm)
		}
	}
}

// TestSpread: a batch's events get times between the moment the ring was
// last seen empty and the moment the batch is read, in proportion to the
// bytes read up to them.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		name                     string
		from, stamp, read, total uint64
		want                     uint64
	}{
		{"first of four records", 1000, 2000, 80, 320, 1250},
		{"second", 1000, 2000, 160, 320, 1500},
		{"last ends at the stamp", 1000, 2000, 320, 320, 2000},
		{"came while the batch was read", 1000, 2000, 400, 320, 2000},
		{"no time passed", 2000, 2000, 80, 320, 2000},
		{"clock read before the last empty ring", 2500, 2000, 80, 320, 2000},
		{"empty batch", 1000, 2000, 0, 0, 2000},
		{"long span, no overflow", 0, 1 << 62, 1 << 31, 1 << 32, 1 << 61},
	} {
		if got := spread(c.from, c.stamp, c.read, c.total); got != c.want {
			t.Errorf("%s: spread(%d, %d, %d, %d) = %d, want %d", c.name, c.from, c.stamp, c.read, c.total, got, c.want)
		}
	}
}

// TestRecordBytes: a record's room in the ring, header included, as the
// kernel rounds it.
func TestRecordBytes(t *testing.T) {
	for n, want := range map[int]uint64{72: 80, 73: 88, 80: 88, 328: 336, 0: 8} {
		if got := recordBytes(n); got != want {
			t.Errorf("recordBytes(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestCompactRecords: the drainer decodes the compact records (struct
// free_event, struct site_event, struct small_event) by their length, each
// field in place; the tagged addresses as the probes tag them (the highest
// user address of 4-level paging, kind and function in the top bits).
func TestCompactRecords(t *testing.T) {
	objs, d := loadDrainer(t, DefaultOptions())
	var buf bytes.Buffer
	tag := func(addr uint64, k event.Kind, f event.Func) uint64 {
		return addr | uint64(k)<<tagAddrBits | uint64(f)<<(tagAddrBits+8)
	}
	free := memtraceFreeEvent{Tagged: tag(0x7fff_ffff_f000, event.Free, event.FuncFree), Pid: 4242, Tid: 4243}
	site := memtraceSiteEvent{Tagged: tag(0x7000, event.Alloc, event.FuncCalloc), CallSite: 0x401000, Size: 0xffff_ffff,
		Pid: 4242, Tid: 4245, Flags: 3 << eventCatShift}
	small := memtraceSmallEvent{Addr: 0x7000, Size: 64, CallSite: 0x401000, Leaf: 0x400800, Pid: 4242, Tid: 4244,
		Kind: uint8(event.Alloc), Func: uint8(event.FuncMalloc), Flags: 5 << eventCatShift}
	for _, rec := range []any{free, site, small} {
		buf.Reset()
		if err := binary.Write(&buf, binary.NativeEndian, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := recordProgram(t, objs, buf.Bytes()).Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []event.Event
	if _, err := d.Poll(0, func(e *event.Event) { got = append(got, *e) }); err != nil {
		t.Fatal(err)
	}
	want := []event.Event{
		{Addr: 0x7fff_ffff_f000, PID: 4242, TID: 4243, Kind: event.Free, Func: event.FuncFree, StackID: -1},
		{Addr: 0x7000, Size: 0xffff_ffff, CallSite: 0x401000, Leaf: 0x401000, PID: 4242, TID: 4245, Kind: event.Alloc,
			Func: event.FuncCalloc, StackID: -1, JVMCategory: 3},
		{Addr: 0x7000, Size: 64, CallSite: 0x401000, Leaf: 0x400800, PID: 4242, TID: 4244, Kind: event.Alloc,
			Func: event.FuncMalloc, StackID: -1, JVMCategory: 5},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Time == 0 {
			t.Errorf("event %d has no time", i)
		}
		got[i].Time = 0
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// loadDrainer loads the objects and opens a drainer, both closed when the test ends.
// busy runs step over and over in n goroutines, each until step returns
// false or stop is called; stop waits for them.
func busy(n int, step func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if !step() {
					return
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

func loadDrainer(t *testing.T, o Options) (*Objects, *Drainer) {
	t.Helper()
	needBPF(t)
	objs, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	d, err := objs.NewDrainer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return objs, d
}

// recordProgram returns a program that writes rec (a multiple of 8 bytes)
// to the objects' ring buffer from its stack, once a run, without waking
// the reader; closed when the test ends.
func recordProgram(t *testing.T, objs *Objects, rec []byte) *ebpf.Program {
	t.Helper()
	n := int16(len(rec))
	var insns asm.Instructions
	for off := int16(0); off < n; off += 8 {
		insns = append(insns,
			asm.LoadImm(asm.R1, int64(binary.NativeEndian.Uint64(rec[off:])), asm.DWord),
			asm.StoreMem(asm.RFP, off-n, asm.R1, asm.DWord))
	}
	insns = append(insns,
		asm.LoadMapPtr(asm.R1, objs.objs.Events.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(-n)),
		asm.Mov.Imm(asm.R3, int32(n)),
		asm.Mov.Imm(asm.R4, 1), // BPF_RB_NO_WAKEUP
		asm.FnRingbufOutput.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "record", Type: ebpf.SocketFilter, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestReleaseBuffers: once released, the ring and the refault slots are
// no longer mapped into memtrace (they count in its resident set), Poll
// hands over nothing, and Uncharge and MovePage do nothing.
func TestReleaseBuffers(t *testing.T) {
	o := DefaultOptions()
	o.RingBytes = 1 << 20
	o.ResidentBytes = 64 << 10
	objs, d := loadDrainer(t, o)
	before := bpfMapBytes(t)
	// The ring: consumer page, producer page and the data twice over;
	// the refault slots: 8 bytes each.
	wantRing := uint64(2*os.Getpagesize()) + 2*uint64(o.RingBytes)
	if before < wantRing+uint64(len(objs.refault)) {
		t.Fatalf("%d bytes of BPF maps mapped, want at least %d (ring) + %d (refault slots)", before, wantRing, len(objs.refault))
	}
	var buf bytes.Buffer
	small := memtraceSmallEvent{Addr: 0x7000, Size: 64, Pid: 4242, Tid: 4244, Kind: uint8(event.Alloc), Func: uint8(event.FuncMalloc)}
	if err := binary.Write(&buf, binary.NativeEndian, small); err != nil {
		t.Fatal(err)
	}
	if _, err := recordProgram(t, objs, buf.Bytes()).Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
		t.Fatal(err)
	}
	if err := d.ReleaseBuffers(); err != nil {
		t.Fatal(err)
	}
	if after := bpfMapBytes(t); after != 0 {
		t.Errorf("%d bytes of BPF maps still mapped after ReleaseBuffers, want 0 (before: %d)", after, before)
	}
	n, err := d.Poll(0, func(e *event.Event) { t.Errorf("event after release: %+v", *e) })
	if n != 0 || err != nil {
		t.Errorf("Poll after release = %d, %v; want 0, nil", n, err)
	}
	objs.Uncharge(4242, 0x7000)
	objs.MovePage(4242, 0x7000, 0x9000)
	if err := d.ReleaseBuffers(); err != nil {
		t.Errorf("second ReleaseBuffers: %v", err)
	}
}

// bpfMapBytes is the size of the BPF maps mapped into this process.
func bpfMapBytes(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "bpf-map") {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		total += hi - lo
	}
	return total
}
