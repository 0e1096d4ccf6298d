package aggregate

import (
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

func TestProcessesAreKeptApart(t *testing.T) {
	tb := NewTable()
	applyAll(tb, []event.Event{
		withPID(10, alloc(blockA, 100, site1)),
		withPID(20, alloc(blockA, 7, site2)), // same address, other process
		withPID(20, mmap(mapA, page, msite)),
		withPID(10, free(blockA)),
		withPID(10, free(blockB)),
	})
	s := tb.Snapshot()
	p10, p20 := processOf(t, s, 10), processOf(t, s, 20)
	checkConsistent(t, p10)
	checkConsistent(t, p20)
	if want := (Stats{Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100}); p10.Heap != want || p10.UnmatchedFrees != 1 || p10.Mapped != (Stats{}) {
		t.Errorf("pid 10: heap %+v unmatched %d mapped %+v; want heap %+v, 1 unmatched, no mapped", p10.Heap, p10.UnmatchedFrees, p10.Mapped, want)
	}
	if want := (Stats{Allocs: 1, AllocBytes: 7, LiveAllocs: 1, LiveBytes: 7}); p20.Heap != want || p20.UnmatchedFrees != 0 || p20.Mapped.LiveBytes != page {
		t.Errorf("pid 20: heap %+v unmatched %d mapped %+v; want heap %+v, 0 unmatched, a page mapped", p20.Heap, p20.UnmatchedFrees, p20.Mapped, want)
	}
	checkLive(t, tb, 10, nil)
	checkLive(t, tb, 20, map[uint64]liveWant{blockA: {7, site2}})
}

func TestAddProcess(t *testing.T) {
	tb := NewTable()
	tb.AddProcess(30, "redis-server")
	tb.AddProcess(30, "") // idempotent: an empty comm keeps the known one
	tb.AddProcess(5, "old")
	tb.AddProcess(5, "new")
	applyAll(tb, []event.Event{withPID(7, alloc(blockA, 1, site1))}) // never registered
	s := tb.Snapshot()
	var got []ProcessSnapshot
	for _, p := range s.Processes {
		got = append(got, ProcessSnapshot{PID: p.PID, Comm: p.Comm})
	}
	want := []ProcessSnapshot{{PID: 5, Comm: "new"}, {PID: 7}, {PID: 30, Comm: "redis-server"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("processes = %+v, want %+v (sorted by PID)", got, want)
	}
	if p := processOf(t, s, 30); p.Heap != (Stats{}) || len(p.Sites) != 0 {
		t.Errorf("registered process without events: %+v, want zero stats", p)
	}
}

func TestSnapshotIsADeepCopy(t *testing.T) {
	tb := NewTable()
	tb.AddProcess(testPID, "app")
	applyAll(tb, []event.Event{alloc(blockA, 100, site1), mmap(mapA, page, msite)})
	before := tb.Snapshot()
	want := tb.Snapshot()

	applyAll(tb, []event.Event{
		free(blockA), alloc(blockB, 5, site1), alloc(blockC, 5, site2), munmap(mapA, page),
		withPID(99, alloc(blockA, 1, site1)),
	})
	tb.SetLost(testPID, 3)
	tb.SetTotalLost(4)
	tb.MarkExited(testPID, 1e9)
	if !reflect.DeepEqual(before, want) {
		t.Errorf("snapshot changed after the table did:\n got %+v\nwant %+v", before, want)
	}

	// And the other way round: editing a snapshot leaves the table alone.
	before.Processes[0].Sites[0].Allocs = 1000
	before.Processes[0].Heap.Allocs = 1000
	after := processOf(t, tb.Snapshot(), testPID)
	checkConsistent(t, after)
	if after.Heap.Allocs != 3 {
		t.Errorf("table heap allocs = %d after editing a snapshot, want 3", after.Heap.Allocs)
	}
}

func TestSnapshotTime(t *testing.T) {
	tb := NewTable()
	for _, ns := range []uint64{500, 900, 700} { // ring buffers deliver slightly out of order
		e := alloc(blockA+ns, 1, site1)
		e.Time = ns
		tb.Apply(&e)
	}
	if got := tb.Snapshot().Time; got != 900 {
		t.Errorf("snapshot time = %d, want the newest event's, 900", got)
	}
}

func TestLiveBlockTime(t *testing.T) {
	tb := NewTable()
	for _, e := range []event.Event{alloc(blockA, 1, site1), alloc(blockB, 1, site1), alloc(blockC, 1, site1)} {
		e.Time = map[uint64]uint64{blockA: 5e9, blockB: 7_250_999_999, blockC: 4e9}[e.Addr]
		tb.Apply(&e)
	}
	for addr, want := range map[uint64]uint64{blockA: 5e9, blockB: 7_250_000_000, blockC: 5e9} {
		if got, ok := tb.LiveBlockTime(testPID, addr); !ok || got != want {
			t.Errorf("LiveBlockTime(%#x) = %d, %v; want %d, true (ms precision; before the first event clamps to it)", addr, got, ok, want)
		}
	}
	if _, ok := tb.LiveBlockTime(testPID, 0x1234); ok {
		t.Error("LiveBlockTime of an unknown block: ok")
	}
	if _, ok := tb.LiveBlockTime(2, blockA); ok {
		t.Error("LiveBlockTime of an unknown process: ok")
	}
}

func TestLostEvents(t *testing.T) {
	tb := NewTable()
	tb.AddProcess(1, "a")
	tb.SetLost(1, 5)
	tb.SetLost(1, 12) // absolute, not added
	tb.SetLost(2, 3)  // creates the process: it had events, they were lost
	tb.SetTotalLost(40)
	s := tb.Snapshot()
	if s.LostEvents != 40 {
		t.Errorf("total lost = %d, want 40", s.LostEvents)
	}
	if got := processOf(t, s, 1).LostEvents; got != 12 {
		t.Errorf("pid 1 lost = %d, want 12", got)
	}
	if got := processOf(t, s, 2).LostEvents; got != 3 {
		t.Errorf("pid 2 lost = %d, want 3", got)
	}
}

func TestMarkExited(t *testing.T) {
	tb := NewTable()
	applyAll(tb, []event.Event{alloc(blockA, 100, site1)})
	tb.MarkExited(testPID, 42e9)
	tb.MarkExited(77, 1) // unknown: nothing to report, not created
	s := tb.Snapshot()
	if len(s.Processes) != 1 {
		t.Fatalf("processes = %+v, want only pid %d", s.Processes, testPID)
	}
	p := s.Processes[0]
	if !p.Exited || p.ExitTime != 42e9 || p.Heap.LiveBytes != 100 {
		t.Errorf("exited process = %+v, want Exited at 42e9 with its 100 live bytes kept", p)
	}
	checkLive(t, tb, testPID, map[uint64]liveWant{blockA: {100, site1}})
}

func TestForget(t *testing.T) {
	tb := NewTable()
	applyAll(tb, []event.Event{alloc(blockA, 100, site1), withPID(2, alloc(blockA, 1, site1))})
	tb.SetLost(testPID, 9)
	tb.Forget(testPID)
	tb.Forget(1234) // unknown: no-op
	s := tb.Snapshot()
	if len(s.Processes) != 1 || s.Processes[0].PID != 2 {
		t.Errorf("processes after Forget = %+v, want only pid 2", s.Processes)
	}
	if _, _, ok := tb.LiveBlock(testPID, blockA); ok {
		t.Error("forgotten process still has a live block")
	}
	// A later event starts the PID afresh (a reused PID is another process).
	applyAll(tb, []event.Event{free(blockA)})
	p := processOf(t, tb.Snapshot(), testPID)
	if p.Heap != (Stats{}) || p.UnmatchedFrees != 1 || p.LostEvents != 0 || len(p.Sites) != 0 {
		t.Errorf("pid after Forget and a free = %+v, want a fresh process with one unmatched free", p)
	}
}

func TestForEachLiveStops(t *testing.T) {
	tb := NewTable()
	applyAll(tb, []event.Event{alloc(blockA, 1, site1), alloc(blockB, 2, site1), alloc(blockC, 3, site1)})
	calls := 0
	tb.ForEachLive(testPID, func(addr, size, site uint64) bool {
		calls++
		return false
	})
	if calls != 1 {
		t.Errorf("ForEachLive called fn %d times after it returned false, want 1", calls)
	}
	tb.ForEachLive(55, func(addr, size, site uint64) bool {
		t.Error("ForEachLive of an unknown pid called fn")
		return true
	})
}

func TestUnknownKindIsIgnored(t *testing.T) {
	tb := NewTable()
	applyAll(tb, []event.Event{alloc(blockA, 1, site1), {Kind: 99, PID: testPID, Addr: blockA}})
	p := processOf(t, tb.Snapshot(), testPID)
	if p.Heap.LiveAllocs != 1 || p.UnmatchedFrees != 0 {
		t.Errorf("after an unknown kind: %+v", p)
	}
}

// TestApplyDoesNotAllocate checks the hot path once the tables have grown:
// allocs, frees, reallocs and mmaps over known sites and a stable live set.
func TestApplyDoesNotAllocate(t *testing.T) {
	tb := NewTable()
	evs := []event.Event{
		alloc(blockA, 10, site1), realloc(blockA, blockB, 20, site2), free(blockB),
		withPID(2, alloc(blockC, 30, site1)), withPID(2, free(blockC)),
		mmap(mapA, 4*page, msite), munmap(mapA+page, page), mremap(mapA, page, mapB, 2*page),
		munmap(mapA, 4*page), munmap(mapB, 2*page),
	}
	applyAll(tb, evs) // warm up: sites, processes, table capacity
	n := testing.AllocsPerRun(1000, func() {
		for i := range evs {
			tb.Apply(&evs[i])
		}
	})
	if n != 0 {
		t.Errorf("Apply allocated %v times per run of %d events, want 0", n, len(evs))
	}
	checkLive(t, tb, testPID, nil)
	checkLive(t, tb, 2, nil)
}

// TestBeforeTable: a site with an event charged before its unwind table
// was in (event.NoTable) says so, heap and mmap sites alike; other sites
// do not.
func TestBeforeTable(t *testing.T) {
	tb := NewTable()
	noTable := func(e event.Event) event.Event { e.NoTable = true; return e }
	applyAll(tb, []event.Event{
		noTable(alloc(blockA, 10, site1)),
		alloc(blockB, 10, site1), // later, with the table: the site stays marked
		alloc(blockC, 10, site2),
		noTable(mmap(mapA, page, msite)),
		noTable(free(blockC)), // a free has no site: nothing to mark
	})
	got := map[uint64]bool{}
	for _, s := range processOf(t, tb.Snapshot(), testPID).Sites {
		got[s.Address] = s.BeforeTable
	}
	want := map[uint64]bool{site1: true, site2: false, msite: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("before_table by site %v, want %v", got, want)
	}
}
