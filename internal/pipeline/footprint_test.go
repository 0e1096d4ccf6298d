package pipeline

import (
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
)

// TestAligned: a reading's range states follow their regions into a later
// snapshot; a region made or cut since has none.
func TestAligned(t *testing.T) {
	a, b, c := footprint.Range{Start: 0x1000, End: 0x3000}, footprint.Range{Start: 0x5000, End: 0x6000}, footprint.Range{Start: 0x8000, End: 0x9000}
	sa, sb := footprint.State{Reserved: 0x2000, Committed: 0x1000, Resident: 0x1000}, footprint.State{Reserved: 0x1000}
	r := footprint.Reading{RSS: 7, Ranges: []footprint.State{sa, sb}}
	tests := []struct {
		name    string
		regions []footprint.Range
		want    []footprint.State
	}{
		{"unchanged", []footprint.Range{a, b}, []footprint.State{sa, sb}},
		{"a region made since", []footprint.Range{a, b, c}, []footprint.State{sa, sb, {}}},
		{"a region gone", []footprint.Range{b}, []footprint.State{sb}},
		{"a region cut", []footprint.Range{{Start: 0x1000, End: 0x2000}, b}, []footprint.State{{}, sb}},
	}
	for _, tc := range tests {
		got := Aligned(r, []footprint.Range{a, b}, tc.regions)
		if !slices.Equal(got.Ranges, tc.want) || got.RSS != 7 {
			t.Errorf("%s: %+v, want %+v", tc.name, got.Ranges, tc.want)
		}
	}
}

// TestFootprintPacer: a process read within footprintDuty of its last
// reading keeps that one; a fresh report reads it again; once it has
// exited, the reading taken at its exit stop stands; Forget drops the
// latest.
func TestFootprintPacer(t *testing.T) {
	pid := os.Getpid()
	var recorded int
	f := &FootprintPacer{
		Options:  func(int, []footprint.Range) footprint.Options { return footprint.Options{Detect: true} },
		Attached: func(int) bool { return true },
		Record:   func(int, footprint.Reading, []footprint.Range) { recorded++ },
		Log:      slog.New(slog.DiscardHandler),
	}
	snap := func() *aggregate.Snapshot {
		return &aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: uint32(pid)}}}
	}
	for i, c := range []struct {
		fresh bool
		want  int
	}{{false, 1}, {false, 1}, {true, 2}} {
		s := snap()
		f.Read(s, c.fresh)
		if recorded != c.want || s.Processes[0].Footprint == nil || !s.Processes[0].Footprint.Attached {
			t.Fatalf("read %d: %d recorded, want %d; footprint %+v", i, recorded, c.want, s.Processes[0].Footprint)
		}
	}
	f.Forget(pid)
	s := snap()
	s.Processes[0].Exited = true
	f.Read(s, false)
	if s.Processes[0].Footprint != nil {
		t.Errorf("exited, forgotten, no exit reading: footprint %+v", s.Processes[0].Footprint)
	}
	f.ReadExit(pid, nil)
	s = snap()
	f.Read(s, true)
	if recorded != 3 || s.Processes[0].Footprint == nil || s.Processes[0].Footprint.Attached {
		t.Errorf("after the exit reading: %d recorded, want 3; footprint %+v (the exit reading is not marked attached)", recorded, s.Processes[0].Footprint)
	}
}

// TestReadChanged: between the timeline's readings, a process is read
// when it has none yet (and holds something), when its traced memory
// moved by more than a sixteenth and 1 MiB since its last, or when a
// reading Read was due to take was put off by the duty, and not within
// footprintDuty of the last; the others get no footprint.
func TestReadChanged(t *testing.T) {
	pid := os.Getpid()
	var recorded int
	f := &FootprintPacer{
		Options:  func(int, []footprint.Range) footprint.Options { return footprint.Options{} },
		Attached: func(int) bool { return true },
		Record:   func(int, footprint.Reading, []footprint.Range) { recorded++ },
		Log:      slog.New(slog.DiscardHandler),
	}
	const MiB = 1 << 20
	for i, c := range []struct {
		live uint64
		idle bool // the last reading is older than its duty
		read bool
	}{
		{0, true, false},         // nothing yet: nothing to show
		{10 * MiB, false, true},  // the first reading
		{10 * MiB, true, false},  // unchanged
		{11 * MiB, true, false},  // 1 MiB: not more than 1 MiB
		{12 * MiB, false, false}, // moved 2 MiB, but within the duty of the last reading
		{12 * MiB, true, true},   // and once the duty has passed
		{12*MiB - 2*MiB, true, true},
		{10 * MiB, false, false}, // unchanged; Read is due but put off by the duty
		{10 * MiB, true, true},   // the reading put off, once the duty allows
		{10 * MiB, true, false},  // and no more
	} {
		if last, ok := f.last[pid]; ok {
			last.at, last.took = time.Now(), time.Hour // within its duty
			if c.idle {
				last.at, last.took = time.Now().Add(-time.Hour), time.Millisecond
			}
			f.last[pid] = last
		}
		if i == 7 {
			f.Read(&aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: uint32(pid), Heap: aggregate.Stats{LiveBytes: c.live}}}}, false)
		}
		before := recorded
		s := &aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: uint32(pid), Heap: aggregate.Stats{LiveBytes: c.live}}}}
		f.ReadChanged(s)
		if read := recorded > before; read != c.read || read != (s.Processes[0].Footprint != nil) {
			t.Errorf("step %d (live %d): read %v (footprint %v), want %v", i, c.live, read, s.Processes[0].Footprint != nil, c.read)
		}
	}
}
