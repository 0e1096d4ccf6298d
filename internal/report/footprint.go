package report

import (
	"bytes"
	"cmp"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
)

// footprintRecord is the process record's "footprint" object: the
// kernel's RSS and its breakdown (docs/json.md). All zero without a
// reading.
type footprintRecord struct {
	RSSBytes           uint64 `json:"rss_bytes"`
	RSSAnonBytes       uint64 `json:"rss_anon_bytes"`
	RSSFileBytes       uint64 `json:"rss_file_bytes"`
	RSSShmemBytes      uint64 `json:"rss_shmem_bytes"`
	SwapBytes          uint64 `json:"swap_bytes"`
	PSSBytes           uint64 `json:"pss_bytes"`
	HeapResidentBytes  uint64 `json:"heap_resident_bytes"`
	HeapRetainedBytes  uint64 `json:"heap_retained_bytes"`
	AnonResidentBytes  uint64 `json:"anon_resident_bytes"`
	StackResidentBytes uint64 `json:"stack_resident_bytes"`
	FileResidentBytes  uint64 `json:"file_resident_bytes"`
	UnexplainedBytes   uint64 `json:"unexplained_bytes"`
	Cgroup             string `json:"cgroup"`
	CgroupMemoryBytes  uint64 `json:"cgroup_memory_bytes"`
	// A Go program's heap and runtime (all zero, source "", otherwise).
	GoHeapReservedBytes    uint64 `json:"go_heap_reserved_bytes"`
	GoHeapCommittedBytes   uint64 `json:"go_heap_committed_bytes"`
	GoHeapResidentBytes    uint64 `json:"go_heap_resident_bytes"`
	GoHeapSource           string `json:"go_heap_source"`
	GoRuntimeResidentBytes uint64 `json:"go_runtime_resident_bytes"`
}

func newFootprintRecord(p aggregate.ProcessSnapshot) footprintRecord {
	f := p.Footprint
	if f == nil {
		return footprintRecord{}
	}
	return footprintRecord{
		RSSBytes:           f.RSS,
		RSSAnonBytes:       f.RSSAnon,
		RSSFileBytes:       f.RSSFile,
		RSSShmemBytes:      f.RSSShmem,
		SwapBytes:          f.Swap,
		PSSBytes:           f.PSS,
		HeapResidentBytes:  f.HeapResident,
		HeapRetainedBytes:  retained(p),
		AnonResidentBytes:  f.AnonResident,
		StackResidentBytes: f.StackResident,
		FileResidentBytes:  f.FileResident,
		UnexplainedBytes:   f.Unexplained,
		Cgroup:             f.Cgroup,
		CgroupMemoryBytes:  f.CgroupMemory,

		GoHeapReservedBytes:    f.GoHeap.Reserved,
		GoHeapCommittedBytes:   f.GoHeap.Committed,
		GoHeapResidentBytes:    f.GoHeap.Resident,
		GoHeapSource:           f.GoHeapSource,
		GoRuntimeResidentBytes: f.GoRuntimeResident,
	}
}

// retained is the heap's resident memory that holds no live block the
// probes saw: free space the allocator keeps (and, with -p, blocks
// allocated before memtrace attached). 0 when live exceeds resident
// (blocks allocated but never touched are not in RAM).
func retained(p aggregate.ProcessSnapshot) uint64 {
	if p.Footprint == nil || p.Footprint.HeapResident < p.Heap.LiveBytes {
		return 0
	}
	return p.Footprint.HeapResident - p.Heap.LiveBytes
}

func newMappingState(s footprint.State) mappingState {
	return mappingState{ReservedBytes: s.Reserved, CommittedBytes: s.Committed, ResidentBytes: s.Resident}
}

// writeFootprintText prints the footprint lines of a process header: the
// mappings by state, the RSS and its breakdown, and what can be done
// about memory the heap retains. Nothing without a reading.
func writeFootprintText(b *bytes.Buffer, p rankedProcess, raw bool) {
	f := p.Footprint
	if f == nil {
		return
	}
	if hasMapped(p) {
		m := p.MappedState
		line(b, "mmap state:", "reserved %s, committed %s, resident %s",
			byteText(m.Reserved, raw), byteText(m.Committed, raw), byteText(m.Resident, raw))
	}
	line(b, "rss:", "%s (anon %s, file %s, shmem %s)", byteText(f.RSS, raw),
		byteText(f.RSSAnon, raw), byteText(f.RSSFile, raw), byteText(f.RSSShmem, raw))
	if f.GoHeapSource != "" {
		line(b, "go heap:", "reserved %s, committed %s, resident %s (%s)", byteText(f.GoHeap.Reserved, raw),
			byteText(f.GoHeap.Committed, raw), byteText(f.GoHeap.Resident, raw), goHeapFrom[f.GoHeapSource])
	}
	ret := retained(p.ProcessSnapshot)
	switch {
	case f.GoHeapSource != "" && f.HeapResident == 0 && p.Heap.LiveBytes == 0:
		// A Go program without C allocations: no malloc heap to speak of.
	case f.HeapResident < p.Heap.LiveBytes:
		line(b, "heap rss:", "%s, less than live %s (blocks not all touched yet)",
			byteText(f.HeapResident, raw), byteText(p.Heap.LiveBytes, raw))
	case f.Attached:
		// Blocks allocated before memtrace attached are in RAM but not live
		// to memtrace: they are in the retained part, and said to be.
		line(b, "heap rss:", "%s = live %s + retained or allocated before attach %s",
			byteText(f.HeapResident, raw), byteText(p.Heap.LiveBytes, raw), byteText(ret, raw))
	default:
		line(b, "heap rss:", "%s = live %s + retained %s (utilization %d%%)", byteText(f.HeapResident, raw),
			byteText(p.Heap.LiveBytes, raw), byteText(ret, raw), p.Heap.LiveBytes*100/max(f.HeapResident, 1))
	}
	goRuntime := ""
	if f.GoHeapSource != "" {
		goRuntime = "go runtime " + byteText(f.GoRuntimeResident, raw) + ", "
	}
	line(b, "rest of rss:", "%smmap %s, stacks %s, files %s, unexplained %s", goRuntime, byteText(f.AnonResident, raw),
		byteText(f.StackResident, raw), byteText(f.FileResident, raw), byteText(f.Unexplained, raw))
	if ret > 1<<20 && ret > f.HeapResident/2 && !f.Attached {
		line(b, "", "most of the heap's RSS holds no live block: see docs/footprint.md")
		line(b, "", "(malloc_trim(0), MALLOC_ARENA_MAX, jemalloc's dirty_decay_ms)")
	}
}

// goHeapFrom says how a Go heap's arenas were found.
var goHeapFrom = map[string]string{
	footprint.GoHeapFromRuntime:   "arenas from the runtime's mheap_",
	footprint.GoHeapFromAddresses: "arenas found by alignment: the executable has no symbol table",
}

// SortRSS ranks processes by their RSS (whole host: what the kernel
// charges them), mmap sites by resident bytes and heap sites by live
// bytes, whose residency is the heap's as a whole.
const SortRSS SortKey = "rss"

func compareResident(a, b aggregate.SiteSnapshot) int {
	return cmp.Or(cmp.Compare(b.Mapping.Resident, a.Mapping.Resident), cmp.Compare(b.LiveBytes, a.LiveBytes))
}

// footprintColumns are the whole-host process table's footprint columns.
var footprintColumns = []any{"RSS", "HEAP RSS", "MMAP RSS", "STACKS", "UNEXPLAINED", "CGROUP MEM"}

// anyFootprint says whether the table gets footprint columns: not when
// no process has a reading (a replayed recording, tests' snapshots).
func anyFootprint(procs []aggregate.ProcessSnapshot) bool {
	for _, p := range procs {
		if p.Footprint != nil {
			return true
		}
	}
	return false
}

func footprintCells(p aggregate.ProcessSnapshot, raw bool) []string {
	f := p.Footprint
	if f == nil {
		return []string{"-", "-", "-", "-", "-", "-"}
	}
	// A Go program's heap is its allocator's: HEAP RSS holds it too.
	return []string{byteCell(f.RSS, raw), byteCell(f.HeapResident+f.GoHeap.Resident, raw), byteCell(f.AnonResident, raw),
		byteCell(f.StackResident, raw), byteCell(f.Unexplained, raw), byteCell(f.CgroupMemory, raw)}
}

// showStates says whether a site table gets COMMITTED and RESIDENT
// columns: mmap sites of a process with a footprint reading (LIVE is their
// reserved bytes).
func showStates(p rankedProcess, c aggregate.Category) bool {
	return c == aggregate.Mapped && p.Footprint != nil
}

// The two columns go before FUNCTION, the third column from the end.
func statesHeader(cols []any, on bool) []any {
	if !on {
		return cols
	}
	i := len(cols) - 3
	return append(append(append([]any{}, cols[:i]...), "COMMITTED", "RESIDENT"), cols[i:]...)
}

func statesAlignment(a tw.CellAlignment, on bool) tw.CellAlignment {
	if !on {
		return a
	}
	pc := a.PerColumn
	i := len(pc) - 3
	return tw.CellAlignment{PerColumn: append(append(append([]tw.Align{}, pc[:i]...), tw.AlignRight, tw.AlignRight), pc[i:]...)}
}

func statesRow(row []string, s aggregate.SiteSnapshot, on, raw bool) []string {
	if !on {
		return row
	}
	i := len(row) - 3
	return append(append(append([]string{}, row[:i]...), byteCell(s.Mapping.Committed, raw), byteCell(s.Mapping.Resident, raw)), row[i:]...)
}
