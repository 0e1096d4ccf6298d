package aggregate

import (
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

func TestJVMCategories(t *testing.T) {
	tb := NewTable()
	tb.SetJVMCategories(1, []string{"Java Heap", "Class", "Symbol"})
	for _, e := range []event.Event{
		{PID: 1, Kind: event.Alloc, Addr: 0x10, Size: 100, CallSite: 0xa, JVMCategory: 3}, // Symbol
		{PID: 1, Kind: event.Alloc, Addr: 0x20, Size: 50, CallSite: 0xa, JVMCategory: 2},  // Class, same site: a site apart
		{PID: 1, Kind: event.Alloc, Addr: 0x30, Size: 70, CallSite: 0xb, JVMCategory: 2},
		{PID: 1, Kind: event.Alloc, Addr: 0x40, Size: 9, CallSite: 0xc}, // not through os::malloc
		{PID: 1, Kind: event.Realloc, OldAddr: 0x30, Addr: 0x50, Size: 80, CallSite: 0xb, JVMCategory: 2},
		{PID: 1, Kind: event.Alloc, Addr: 0x60, Size: 5, CallSite: 0xd, JVMCategory: 9}, // past the names
		{PID: 1, Kind: event.Free, Addr: 0x10},
		{PID: 2, Kind: event.Alloc, Addr: 0x10, Size: 1, CallSite: 0xa},
	} {
		tb.Apply(&e)
	}
	s := tb.Snapshot()
	want := []JVMCategoryStats{
		{"Class", Stats{Allocs: 3, AllocBytes: 200, Frees: 1, FreedBytes: 70, LiveAllocs: 2, LiveBytes: 130}},
		{"#8", Stats{Allocs: 1, AllocBytes: 5, LiveAllocs: 1, LiveBytes: 5}},
		{"Symbol", Stats{Allocs: 1, AllocBytes: 100, Frees: 1, FreedBytes: 100}},
		{"", Stats{Allocs: 1, AllocBytes: 9, LiveAllocs: 1, LiveBytes: 9}},
	}
	if got := s.Processes[0].JVM; !reflect.DeepEqual(got, want) {
		t.Errorf("JVM = %+v\nwant %+v", got, want)
	}
	if n := len(s.Processes[0].Sites); n != 5 {
		t.Errorf("%d sites, want 5 (0xa twice: two categories)", n)
	}
	for _, site := range s.Processes[0].Sites {
		if site.Address == 0xa && site.JVMCategory != "Symbol" && site.JVMCategory != "Class" {
			t.Errorf("site 0xa category %q", site.JVMCategory)
		}
	}
	if s.Processes[1].JVM != nil {
		t.Errorf("no JVM, yet %+v", s.Processes[1].JVM)
	}
}
