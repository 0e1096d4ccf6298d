package report

import (
	"strings"

	"github.com/memtrace/memtrace/symbolize"
)

// A runtime with a moving collector makes its heap resident in its
// collector's code (copying live objects into fresh pages) and in its
// allocation paths (zeroing new objects): the page faults charge those
// functions, which are no call site of the program's. Resident rows
// charged to them are named after the heap, with the function as its
// writer (docs/runtimes-jit.md). Matched by the function's demangled
// name; a row that matches nothing keeps its own name.
var managedHeapWriters = []struct {
	heap     string
	prefixes []string
}{
	{"Java heap", []string{
		// HotSpot's collectors copying and compacting objects.
		"G1ParScanThreadState::", "G1FullGCCompactTask", "G1FullGCCompactionPoint::", "G1EvacuateRegionsTask",
		"PSPromotionManager::", "PSScavenge::", "PSParallelCompact::", "DefNewGeneration::", "TenuredGeneration::",
		"ShenandoahHeap::", "ZHeap::", "ZRelocate", "XHeap::",
		// Its allocation paths zeroing new objects.
		"MemAllocator::", "ObjAllocator::", "ObjArrayAllocator::", "ClassAllocator::", "CollectedHeap::",
	}},
	// V8's, from its sources: the runs here showed none of them with many
	// pages (node's heap pages fault in JIT code, or in GC bookkeeping).
	{"V8 heap", []string{
		"v8::internal::Scavenger", "v8::internal::ScavengerCollector::", "v8::internal::Evacuat",
		"v8::internal::MarkCompactCollector::", "v8::internal::MinorMarkCompactCollector::",
		"v8::internal::MinorMarkSweepCollector::", "v8::internal::SemiSpace",
		"v8::internal::NewSpace::", "v8::internal::PagedSpace", "v8::internal::LargeObjectSpace::",
		"v8::internal::MemoryAllocator::", "v8::internal::Factory::",
	}},
	{"CLR heap", []string{"WKS::gc_heap::", "SVR::gc_heap::"}},
}

// managedHeap names the managed heap whose pages a function writes as its
// runtime's collector or allocator, "" when it is none of those.
func managedHeap(function string) string {
	for _, h := range managedHeapWriters {
		for _, p := range h.prefixes {
			if strings.HasPrefix(function, p) {
				return h.heap
			}
		}
	}
	return ""
}

// residentFunctionLabel is a resident row's FUNCTION cell: the heap and
// its writer for a managed heap's collector or allocator, else as any
// site's.
func residentFunctionLabel(f symbolize.Frame) string {
	heap := managedHeap(f.Function)
	if heap == "" {
		return functionLabel(f)
	}
	writer := symbolize.ShortName(f.Function, symbolize.NoTemplateArgsOrParams)
	writer = strings.TrimSuffix(strings.TrimSuffix(writer, " const"), "(…)")
	return elideMiddle(heap+", by "+writer, maxFunctionWidth)
}
