package report

import (
	"testing"

	"github.com/memtrace/memtrace/symbolize"
)

func TestManagedHeapLabel(t *testing.T) {
	tests := []struct {
		function, heap, label string
	}{
		{"G1ParScanThreadState::trim_queue_to_threshold(unsigned int)", "Java heap", "Java heap, by G1ParScanThreadState::trim_queue_to_threshold"},
		{"ObjArrayAllocator::initialize(HeapWordImpl**) const", "Java heap", "Java heap, by ObjArrayAllocator::initialize"},
		{"v8::internal::Scavenger::ScavengePage(v8::internal::MemoryChunk*)", "V8 heap", "V8 heap, by v8::internal::Scavenger::ScavengePage"},
		{"WKS::gc_heap::plan_phase(int)", "CLR heap", "CLR heap, by WKS::gc_heap::plan_phase"},
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
