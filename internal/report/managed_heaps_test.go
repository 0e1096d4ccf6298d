package report

import (
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
	"github.com/memtrace/memtrace/internal/symbolize"
)

func TestManagedHeapLabel(t *testing.T) {
	tests := []struct {
		function, heap, label string
	}{
		{"G1ParScanThreadState::trim_queue_to_threshold(unsigned int)", "Java heap", "Java heap, by G1ParScanThreadState::trim_queue_to_threshold"},
		{"ObjArrayAllocator::initialize(HeapWordImpl**) const", "Java heap", "Java heap, by ObjArrayAllocator::initialize"},
		{"v8::internal::Scavenger::ScavengePage(v8::internal::MemoryChunk*)", "V8 heap", "V8 heap, by v8::internal::Scavenger::ScavengePage"},
		{"WKS::gc_heap::plan_phase(int)", "CLR heap", "CLR heap, by WKS::gc_heap::plan_phase"},
		{"v8::internal::FactoryBase<v8::internal::Factory>::NewFixedArrayWithFiller(v8::internal::Handle<v8::internal::Map>, int, v8::internal::Handle<v8::internal::HeapObject>, v8::internal::AllocationType)",
			"V8 heap", "V8 heap, by v8::internal::Fac…se<…>::NewFixedArrayWithFiller"},
		// The GC's own bookkeeping and the program's code keep their names.
		{"BitMap::clear_range(unsigned long, unsigned long)", "", "BitMap::clear_range(unsigned long, unsigned long)"},
		{"int DirectKeeper.keep(java.util.List, int, int)", "", "int DirectKeeper.keep(java.util.List, int, int)"},
	}
	for _, tt := range tests {
		if got := managedHeap(tt.function); got != tt.heap {
			t.Errorf("managedHeap(%q) = %q, want %q", tt.function, got, tt.heap)
		}
		if got := residentFunctionLabel(symbolize.Frame{Function: tt.function}); got != tt.label {
			t.Errorf("label of %q = %q, want %q", tt.function, got, tt.label)
		}
	}
}

// TestManagedHeaps: a process's runtime heaps are its reading's (a JVM's)
// and the sum of the mmap sites of V8's page allocator; other mmap sites
// and heap sites are none of them.
func TestManagedHeaps(t *testing.T) {
	sym := fakeSymbolizer{
		0x10: {Function: "v8::base::OS::Allocate(void*, unsigned long, unsigned long, v8::base::OS::MemoryPermission)"},
		0x20: {Function: "v8::internal::VirtualMemoryCage::InitReservation(v8::internal::VirtualMemoryCage::ReservationParams const&, v8::base::AddressRegion)"},
		0x30: {Function: "allocate_stack"},
	}
	java := footprint.ManagedHeap{Name: "Java heap", State: footprint.State{Reserved: 256 * MiB, Committed: 64 * MiB, Resident: 60 * MiB}, Located: true, Source: "hsperfdata"}
	p := aggregate.ProcessSnapshot{PID: 7, Footprint: &footprint.Reading{ManagedHeaps: []footprint.ManagedHeap{java}}, Sites: []aggregate.SiteSnapshot{
		{Address: 0x10, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: 100 * MiB}, Mapping: footprint.State{Reserved: 100 * MiB, Committed: 40 * MiB, Resident: 30 * MiB}},
		{Address: 0x20, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: 128 * MiB}, Mapping: footprint.State{Reserved: 128 * MiB, Committed: 2 * MiB, Resident: 1 * MiB}},
		{Address: 0x30, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: 8 * MiB}, Mapping: footprint.State{Reserved: 8 * MiB, Committed: 8 * MiB, Resident: 64 * KiB}},
		{Address: 0x10, Category: aggregate.Heap, Stats: aggregate.Stats{LiveBytes: 5 * MiB}},
	}}
	want := []footprint.ManagedHeap{java,
		{Name: "V8 heap", State: footprint.State{Reserved: 228 * MiB, Committed: 42 * MiB, Resident: 31 * MiB}, Located: true, Source: "mmap"}}
	if got := managedHeaps(p, sym); !reflect.DeepEqual(got, want) {
		t.Errorf("managedHeaps:\n got %+v\nwant %+v", got, want)
	}
	if got := mappedFunctionLabel(sym[0x10], aggregate.Mapped); got != "V8 heap, by v8::base::OS::Allocate" {
		t.Errorf("mmap row label %q", got)
	}
	if got := mappedFunctionLabel(sym[0x10], aggregate.Heap); got == "V8 heap, by v8::base::OS::Allocate" {
		t.Errorf("heap row label %q: a heap site is no V8 heap mapping", got)
	}
}
