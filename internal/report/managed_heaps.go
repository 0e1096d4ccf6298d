package report

import (
	"bytes"
	"slices"
	"strings"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"

	"github.com/memtrace/memtrace/internal/symbolize"
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
		"v8::internal::MemoryAllocator::", "v8::internal::Factory::", "v8::internal::FactoryBase<",
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
	return heapWriterLabel(heap, f.Function)
}

// heapWriterLabel is "HEAP, by FUNCTION", the function's name short.
func heapWriterLabel(heap, function string) string {
	writer := symbolize.ShortName(function, symbolize.NoTemplateArgsOrParams)
	writer = strings.TrimSuffix(strings.TrimSuffix(writer, " const"), "(…)")
	return elideMiddle(heap+", by "+writer, maxFunctionWidth)
}

// v8HeapMappers are the functions through which V8 maps its heap's pages
// (its platform's page allocator and the heap's reservations): an mmap
// call site charged to one of them is the V8 heap's, not the program's.
var v8HeapMappers = []string{
	"v8::base::OS::Allocate", "v8::base::OS::AllocateShared", "v8::base::OS::SetPermissions",
	"v8::base::PageAllocator::", "v8::base::BoundedPageAllocator::",
	"v8::internal::VirtualMemory", "v8::internal::MemoryAllocator::", "v8::internal::CodeRange::",
	"v8::internal::VirtualMemoryCage::",
}

// isV8HeapMapper reports whether fn maps V8's heap.
func isV8HeapMapper(fn string) bool {
	return slices.ContainsFunc(v8HeapMappers, func(m string) bool { return strings.HasPrefix(fn, m) })
}

// mappedHeap is the runtime heap an mmap site maps ("V8 heap"), "" for
// none.
func mappedHeap(f symbolize.Frame, c aggregate.Category) string {
	if c == aggregate.Mapped && isV8HeapMapper(f.Function) {
		return "V8 heap"
	}
	return ""
}

// mappedFunctionLabel is a call site's FUNCTION cell: an mmap site of
// V8's page allocator is the V8 heap's ("V8 heap, by …"), which the
// footprint's "managed:" line sums up, no site of the program's.
func mappedFunctionLabel(f symbolize.Frame, c aggregate.Category) string {
	heap := mappedHeap(f, c)
	if heap == "" {
		return functionLabel(f)
	}
	return heapWriterLabel(heap, f.Function)
}

// managedHeaps are the runtime heaps of a process: the JVM's, from its
// reading, and V8's, the sum of the mmap call sites of its page
// allocator (reserved is their live bytes; committed and resident their
// states, known once the process has a reading).
func managedHeaps(p aggregate.ProcessSnapshot, sym Symbolizer) []footprint.ManagedHeap {
	var out []footprint.ManagedHeap
	if p.Footprint != nil {
		out = append(out, p.Footprint.ManagedHeaps...)
	}
	v8 := footprint.ManagedHeap{Name: "V8 heap", Source: "mmap", Located: p.Footprint != nil}
	found := false
	for _, s := range p.Sites {
		if s.Category != aggregate.Mapped || s.LiveBytes == 0 {
			continue
		}
		if !isV8HeapMapper(resolve(sym, p.PID, s.Address).Function) {
			continue
		}
		found = true
		v8.Reserved += s.LiveBytes
		v8.Committed += s.Mapping.Committed
		v8.Resident += s.Mapping.Resident
	}
	if found {
		out = append(out, v8)
	}
	return out
}

// managedHeapRecord is one of a process record's "managed_heaps"
// (docs/json.md).
type managedHeapRecord struct {
	Name           string  `json:"name"`
	ReservedBytes  uint64  `json:"reserved_bytes"`
	CommittedBytes uint64  `json:"committed_bytes"`
	ResidentBytes  *uint64 `json:"resident_bytes"`
	Source         string  `json:"source"`
}

func managedHeapRecords(hs []footprint.ManagedHeap) []managedHeapRecord {
	var out []managedHeapRecord
	for _, h := range hs {
		r := managedHeapRecord{Name: h.Name, ReservedBytes: h.Reserved, CommittedBytes: h.Committed, Source: h.Source}
		if h.Located {
			r.ResidentBytes = &h.Resident
		}
		out = append(out, r)
	}
	return out
}

// writeManagedHeapsText prints one line per runtime heap of a process.
func writeManagedHeapsText(b *bytes.Buffer, hs []footprint.ManagedHeap, raw bool) {
	for i, h := range hs {
		label := ""
		if i == 0 {
			label = "managed:"
		}
		res := "resident unknown"
		if h.Located {
			res = "resident " + byteText(h.Resident, raw)
		}
		line(b, label, "%-11s reserved %s, committed %s, %s (%s)", h.Name, byteText(h.Reserved, raw),
			byteText(h.Committed, raw), res, h.Source)
	}
}
