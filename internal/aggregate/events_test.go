package aggregate

import (
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

// Event constructors for tests: PID 1 unless stated, Time left to apply.

const testPID = 1

func alloc(addr, size, site uint64) event.Event {
	return event.Event{Kind: event.Alloc, Func: event.FuncMalloc, PID: testPID, Addr: addr, Size: size, CallSite: site}
}

func free(addr uint64) event.Event {
	return event.Event{Kind: event.Free, Func: event.FuncFree, PID: testPID, Addr: addr, CallSite: 0xf4ee}
}

func realloc(oldAddr, addr, size, site uint64) event.Event {
	return event.Event{Kind: event.Realloc, Func: event.FuncRealloc, PID: testPID, OldAddr: oldAddr, Addr: addr, Size: size, CallSite: site}
}

func mmap(addr, size, site uint64) event.Event {
	return event.Event{Kind: event.Mmap, Func: event.FuncMmap, PID: testPID, Addr: addr, Size: size, CallSite: site}
}

func munmap(addr, size uint64) event.Event {
	return event.Event{Kind: event.Munmap, Func: event.FuncMunmap, PID: testPID, Addr: addr, Size: size, CallSite: 0x3333}
}

func mremap(oldAddr, oldSize, addr, size uint64) event.Event {
	return event.Event{Kind: event.Mremap, Func: event.FuncMremap, PID: testPID, OldAddr: oldAddr, OldSize: oldSize, Addr: addr, Size: size, CallSite: 0x4444}
}

func withPID(pid uint32, e event.Event) event.Event {
	e.PID = pid
	return e
}

// applyAll applies evs in order, stamping each with an increasing Time.
func applyAll(t *Table, evs []event.Event) {
	for i := range evs {
		e := evs[i]
		if e.Time == 0 {
			e.Time = uint64(i+1) * 1000
		}
		t.Apply(&e)
	}
}

type siteKey struct {
	addr uint64
	cat  Category
}

func sitesOf(ps ProcessSnapshot) map[siteKey]Stats {
	m := make(map[siteKey]Stats, len(ps.Sites))
	for _, s := range ps.Sites {
		m[siteKey{s.Address, s.Category}] = s.Stats
	}
	return m
}

func processOf(t *testing.T, s Snapshot, pid uint32) ProcessSnapshot {
	t.Helper()
	for _, p := range s.Processes {
		if p.PID == pid {
			return p
		}
	}
	t.Fatalf("pid %d not in snapshot", pid)
	return ProcessSnapshot{}
}

// checkConsistent asserts what must hold after any event stream: process
// totals are the sums over sites, and per site the bytes balance.
func checkConsistent(t *testing.T, ps ProcessSnapshot) {
	t.Helper()
	var heap, mapped Stats
	for _, s := range ps.Sites {
		sum := &heap
		if s.Category == Mapped {
			sum = &mapped
		}
		sum.Allocs += s.Allocs
		sum.AllocBytes += s.AllocBytes
		sum.Frees += s.Frees
		sum.FreedBytes += s.FreedBytes
		sum.LiveAllocs += s.LiveAllocs
		sum.LiveBytes += s.LiveBytes
		if s.AllocBytes-s.FreedBytes != s.LiveBytes {
			t.Errorf("site %#x %v: AllocBytes %d - FreedBytes %d != LiveBytes %d", s.Address, s.Category, s.AllocBytes, s.FreedBytes, s.LiveBytes)
		}
		if s.Category == Heap && s.Allocs-s.Frees != s.LiveAllocs {
			t.Errorf("site %#x: Allocs %d - Frees %d != LiveAllocs %d", s.Address, s.Allocs, s.Frees, s.LiveAllocs)
		}
	}
	if heap != ps.Heap {
		t.Errorf("pid %d: heap totals %+v, sum over sites %+v", ps.PID, ps.Heap, heap)
	}
	if mapped != ps.Mapped {
		t.Errorf("pid %d: mapped totals %+v, sum over sites %+v", ps.PID, ps.Mapped, mapped)
	}
}
