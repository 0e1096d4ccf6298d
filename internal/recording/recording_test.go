package recording

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// feed gives t a deterministic run: two processes, allocations, frees,
// reallocs, mappings, marks, ticks, lost counts and an exit.
func feed(t *aggregate.Table, events int, tol aggregate.PeakTolerance) {
	rng := rand.New(rand.NewPCG(1, 2))
	t.SetPeakTolerance(tol)
	t.SetHalfLives([]time.Duration{time.Second, 10 * time.Second}, 1e9)
	t.AddProcess(100, "one")
	t.AddProcess(200, "two")
	live := map[uint32][]uint64{}
	now := uint64(1e9)
	next := uint64(0x5555_0000_0000)
	for i := range events {
		if i%500 == 0 {
			now += 20e6
			t.Tick(now)
		}
		pid := uint32(100)
		if i%7 == 0 {
			pid = 200
		}
		e := event.Event{PID: pid, TID: pid + uint32(i%3), Time: now, StackID: -1}
		switch r := rng.IntN(10); {
		case r < 5 || len(live[pid]) == 0:
			next += uint64(16 + rng.IntN(4096))
			e.Kind, e.Func, e.Addr, e.Size = event.Alloc, event.FuncMalloc, next, uint64(1+rng.IntN(4000))
			e.CallSite = 0x401000 + uint64(rng.IntN(20))*5
			live[pid] = append(live[pid], next)
		case r < 9:
			j := rng.IntN(len(live[pid]))
			e.Kind, e.Func, e.Addr = event.Free, event.FuncFree, live[pid][j]
			live[pid] = append(live[pid][:j], live[pid][j+1:]...)
		default:
			j := rng.IntN(len(live[pid]))
			next += 8192
			e.Kind, e.Func, e.OldAddr, e.Addr, e.Size = event.Realloc, event.FuncRealloc, live[pid][j], next, uint64(rng.IntN(9000))
			e.CallSite = 0x402000
			live[pid][j] = next
		}
		// A file's first events, before its unwind table was in: their
		// sites are marked (before_table), in the replay too.
		e.NoTable = i%97 == 0 && e.Kind != event.Free
		t.Apply(&e)
		if i == events/3 {
			t.Mark(100, "phase one", now+1)
			t.Apply(&event.Event{PID: 100, Time: now, Kind: event.Mmap, Func: event.FuncMmap, Addr: 0x7f00_0000_0000, Size: 1 << 20, CallSite: 0x403000, StackID: -1, NoTable: true})
		}
	}
	t.SetLost(100, 3)
	t.SetTotalLost(3)
	t.MarkExited(200, now)
	t.Tick(now + 1e6)
}

// record feeds a Table through a Writer and returns the file and the
// Table's final snapshot.
func record(tb testing.TB, events int) ([]byte, aggregate.Snapshot) {
	return recordTol(tb, events, aggregate.PeakTolerance{Bytes: 4096})
}

func recordTol(tb testing.TB, events int, tol aggregate.PeakTolerance) ([]byte, aggregate.Snapshot) {
	file, snap, _ := recordAll(tb, events, tol)
	return file, snap
}

// recordAll is recordTol that also ends with a leak check of process 100
// (fixtureLeakCheck), which it returns.
func recordAll(tb testing.TB, events int, tol aggregate.PeakTolerance) ([]byte, aggregate.Snapshot, LeakCheck) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{Mode: "pid", Args: []string{"-p", "100"}})
	if err != nil {
		tb.Fatal(err)
	}
	w.SetMaps(func(pid int) []symbolize.CodeMapping {
		return []symbolize.CodeMapping{{Start: 0x400000, End: 0x401000, Offset: 0, Path: "/bin/true", BuildID: "abcd"}}
	})
	t := aggregate.NewTable()
	t.SetObserver(w)
	w.MapsChanged(100)
	feed(t, events, tol)
	lc := fixtureLeakCheck(t, 100)
	w.LeakCheck(&lc)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), t.Snapshot(), lc
}

// replay reads every record it can into a new Table.
func replay(b []byte) (aggregate.Snapshot, []Record, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return aggregate.Snapshot{}, nil, err
	}
	defer r.Close()
	t := aggregate.NewTable()
	var other []Record
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			return t.Snapshot(), other, nil
		}
		if err != nil {
			return t.Snapshot(), other, err
		}
		applyTo(&rec, t)
		if rec.Kind == KindMaps {
			other = append(other, rec)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	file, want := record(t, 20000)
	got, maps, err := replay(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replayed snapshot differs from the live one\n got %+v\nwant %+v", got.Processes[0].Heap, want.Processes[0].Heap)
	}
	if len(want.Marks) != 1 || want.Processes[0].Peak == nil {
		t.Fatalf("fixture lacks a mark or a peak: %+v", want.Marks)
	}
	if len(maps) != 1 || maps[0].PID != 100 || maps[0].Maps[0].Path != "/bin/true" || maps[0].Maps[0].BuildID != "abcd" {
		t.Errorf("maps = %+v", maps)
	}
	t.Logf("%d events in %d bytes (%.2f bytes/event)", 20000, len(file), float64(len(file))/20000)
}

// A run killed while recording leaves a prefix: everything flushed before
// reads back, then ErrTruncated says why the rest is missing.
func TestTruncated(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{})
	if err != nil {
		t.Fatal(err)
	}
	tb := aggregate.NewTable()
	tb.SetObserver(w)
	tb.AddProcess(1, "a")
	for i := range 1000 {
		tb.Apply(&event.Event{PID: 1, Kind: event.Alloc, Func: event.FuncMalloc, Addr: uint64(0x1000 + 16*i), Size: 16, CallSite: 0x400100, Time: 5, StackID: -1})
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	flushed := buf.Len()
	for i := range 1000 {
		tb.Apply(&event.Event{PID: 1, Kind: event.Free, Func: event.FuncFree, Addr: uint64(0x1000 + 16*i), Time: 6})
	}
	w.Flush()
	// Killed: no end record, and the second flush half written.
	cut := flushed + (buf.Len()-flushed)/2
	for _, n := range []int{flushed, cut} {
		snap, _, err := replay(buf.Bytes()[:n])
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: err = %v, want ErrTruncated", n, err)
		}
		if len(snap.Processes) != 1 || snap.Processes[0].Heap.Allocs != 1000 {
			t.Fatalf("cut at %d: prefix = %+v, want the 1000 allocations", n, snap.Processes)
		}
	}
}

func TestBadFiles(t *testing.T) {
	file, _ := record(t, 2000)
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrNotRecording},
		{"not ours", []byte("GIF89a and so on"), ErrNotRecording},
		{"future version", append([]byte(Magic), 9, 0, 0, 0), ErrVersion},
		{"header only", file[:headerLen], ErrTruncated},
		{"garbage stream", append(append([]byte(nil), file[:headerLen]...), bytes.Repeat([]byte{0x55}, 100)...), ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := replay(tc.data)
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// A flipped byte inside the compressed data fails with an error, never a panic.
	bad := append([]byte(nil), file...)
	bad[len(bad)/2] ^= 0xff
	if _, _, err := replay(bad); err == nil {
		t.Errorf("a corrupted recording read without error")
	}
}

func FuzzReader(f *testing.F) {
	file, _ := record(f, 300)
	f.Add(file)
	f.Add(file[:len(file)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		defer r.Close()
		tb := aggregate.NewTable()
		var rec Record
		for n := 0; n < 1e6; n++ {
			if err := r.Next(&rec); err != nil {
				return
			}
			applyTo(&rec, tb)
		}
	})
}

// BenchmarkReplay is replay's speed: decode every record and apply it to
// a Table (the default peak tolerance), per event (the target is at least
// 5 M events/s on one core).
func BenchmarkReplay(b *testing.B) {
	const events = 1000000
	file, _ := recordTol(b, events, aggregate.DefaultPeakTolerance)
	b.SetBytes(int64(len(file)))
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		if _, _, err := replay(file); err != nil {
			b.Fatal(err)
		}
	}
	reportRates(b, events*b.N, start, cpu0)
}

// BenchmarkDecode is the reader alone.
func BenchmarkDecode(b *testing.B) {
	const events = 1000000
	file, _ := record(b, events)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		r, err := NewReader(bytes.NewReader(file))
		if err != nil {
			b.Fatal(err)
		}
		var rec Record
		for r.Next(&rec) == nil {
		}
		r.Close()
	}
	reportRates(b, events*b.N, start, cpu0)
}

// reportRates reports events per second of wall time and of this
// process's CPU time: on a shared machine the second is the one to trust
// (GOMAXPROCS=1 keeps it to one core).
func reportRates(b *testing.B, events int, start time.Time, cpu0 time.Duration) {
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(events)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWrite is the cost a recording adds to the live reader: encode
// and compress one event (malloc/free churn over 4000 call sites, as
// bench's consumer stream).
func BenchmarkWrite(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	evs := make([]event.Event, 1<<16)
	live := make([]uint64, 0, 1<<14)
	addr := uint64(0x5555_0000_0000)
	for i := range evs {
		e := &evs[i]
		e.PID, e.TID, e.Time, e.StackID = 42, 42, uint64(i/1000)*20e6, -1
		if len(live) < 1<<14 && (len(live) == 0 || rng.IntN(2) == 0) {
			addr += uint64(16 + 16*rng.IntN(8))
			e.Kind, e.Func, e.Addr, e.Size, e.CallSite = event.Alloc, event.FuncMalloc, addr, uint64(16+rng.IntN(200)), 0x400000+uint64(rng.IntN(4000))*8
			live = append(live, addr)
		} else {
			j := rng.IntN(len(live))
			e.Kind, e.Func, e.Addr = event.Free, event.FuncFree, live[j]
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	w, err := NewWriter(io.Discard, Info{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := range b.N {
		w.Event(&evs[i&(len(evs)-1)])
	}
	w.Close()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/event")
}
