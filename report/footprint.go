package report

import (
	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/footprint"
)

// footprintRecord is the process record's "footprint" object: the
// kernel's RSS and its breakdown (docs/json.md). All zero without a
// reading.
type footprintRecord struct {
	RSSBytes           uint64 `json:"rss_bytes"`
	RSSAnonBytes       uint64 `json:"rss_anon_bytes"`
	RSSFileBytes       uint64 `json:"rss_file_bytes"`
	RSSShmemBytes      uint64 `json:"rss_shmem_bytes"`
	HeapResidentBytes  uint64 `json:"heap_resident_bytes"`
	HeapRetainedBytes  uint64 `json:"heap_retained_bytes"`
	AnonResidentBytes  uint64 `json:"anon_resident_bytes"`
	StackResidentBytes uint64 `json:"stack_resident_bytes"`
	FileResidentBytes  uint64 `json:"file_resident_bytes"`
	UnexplainedBytes   uint64 `json:"unexplained_bytes"`
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
		HeapResidentBytes:  f.HeapResident,
		HeapRetainedBytes:  retained(p),
		AnonResidentBytes:  f.AnonResident,
		StackResidentBytes: f.StackResident,
		FileResidentBytes:  f.FileResident,
		UnexplainedBytes:   f.Unexplained,
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
