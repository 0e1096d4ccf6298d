package aggregate

import "github.com/memtrace/memtrace/internal/footprint"

// Category separates heap blocks (malloc and friends) from anonymous
// mappings made with mmap: the two are counted apart so that the
// allocator's own large-block mappings are never counted twice.
type Category uint8

const (
	Heap Category = iota
	Mapped
)

func (c Category) String() string {
	if c == Mapped {
		return "mmap"
	}
	return "heap"
}

// Stats are the counters kept per call site and per process.
//
// For the Heap category Allocs counts successful calls of allocation
// functions (realloc included, as heaptrack counts them) and Frees counts
// blocks released (by free, or by realloc moving or releasing a block).
// For the Mapped category Allocs counts mmap calls, AllocBytes the bytes
// mapped (page-rounded), Frees the munmap calls that released tracked bytes,
// FreedBytes those bytes, LiveAllocs the live regions.
type Stats struct {
	Allocs     uint64
	AllocBytes uint64
	Frees      uint64
	FreedBytes uint64
	LiveAllocs uint64
	LiveBytes  uint64
}

// SiteSnapshot is one call site's statistics at snapshot time.
type SiteSnapshot struct {
	// Address is the charged call site: the return address into the first
	// frame outside the allocator and its wrappers.
	Address uint64
	// Leaf is the return address into the allocator's immediate caller
	// (the innermost wrapper's call, or Address itself), as first seen.
	Leaf uint64
	// StackID names the whole user stack in --detail mode (see
	// tracer.Objects.Stack); -1 when stacks are not taken or one failed.
	StackID  int32
	Category Category
	// JVMCategory is the NMT category (its name, as the JVM's libjvm.so
	// spells it) that HotSpot's os::malloc or os::realloc asked for when
	// they made this site's allocations; "" when they did not (outside a
	// JVM, or an allocation the JVM made otherwise).
	JVMCategory string
	// BeforeTable: some of the site's events came before the unwind table
	// of the charged frame's file was loaded: they were charged to that
	// frame as it was, with no wrapper skipped past it (docs/unwinding.md).
	BeforeTable bool
	Stats
	// Rates are the decaying averages of this site's counters, one per
	// half-life, shortest first, as of the last Tick (nil when the Table
	// keeps no rates).
	Rates []RateSnapshot
	// LiveBytesStderr is the standard error of LiveBytes when the heap
	// figures are estimates (Snapshot.SampleBytes > 0); 0 otherwise.
	LiveBytesStderr float64
	// Stacks breaks a heap site's figures down by whole stack, largest
	// live bytes first, when the Table keeps that breakdown
	// (SetStackBreakdown: sampled mode's stacks); they sum to Stats. Nil
	// otherwise.
	Stacks []StackShare
	// Mapping is a Mapped site's address space by state (reserved,
	// committed, resident), from the process's Footprint; zero for heap
	// sites and until a reading.
	Mapping footprint.State
}

// ProcessSnapshot is one process's statistics at snapshot time.
type ProcessSnapshot struct {
	PID    uint32
	Comm   string
	Exited bool
	// Untraced: memtrace met no event of the process (no sampled fault,
	// no allocation); a whole-host report lists it for its footprint
	// alone, and the Table never holds it.
	Untraced bool
	// ExitTime is the kernel monotonic time (ns) when the exit was noticed.
	ExitTime uint64

	// Heap totals over all call sites.
	Heap          Stats
	PeakLiveBytes uint64
	// UnmatchedFrees counts releases of blocks memtrace never saw allocated
	// (made before it attached, or whose event was lost).
	UnmatchedFrees uint64
	// LostEvents is how many of this process's events the kernel could not
	// hand over (ring buffer full). Non-zero means every figure is a lower
	// bound or otherwise incomplete.
	LostEvents uint64

	// Mapped totals for anonymous mmap regions.
	Mapped              Stats
	PeakMappedLiveBytes uint64

	// Sites holds every call site, in no particular order.
	Sites []SiteSnapshot

	// Rates are the decaying averages of the Heap counters, one per
	// half-life, as of the last Tick (nil when the Table keeps no rates).
	Rates []RateSnapshot

	// Sampled mode (SampleBytes > 0, the Table's): the Heap figures, the
	// peak and the sites' figures are estimates; LiveBytesStderr is the
	// standard error of Heap.LiveBytes. CountsExact says Heap.Allocs and
	// Heap.AllocBytes are exact counts from the probes instead.
	SampleBytes     uint64
	LiveBytesStderr float64
	CountsExact     bool

	// Peak is the heap as of the peak snapshot (peak.go); nil before the
	// first allocation.
	Peak *PeakSnapshot

	// Resident is the resident anonymous memory by who made it resident
	// (resident.go); nil when no fault of the process was sampled.
	Resident *ResidentSnapshot

	// JVM is the heap by NMT category when the process is a JVM whose
	// categories memtrace reads (SetJVMCategories), largest live bytes
	// first, then the heap no category claims (Name ""); nil otherwise.
	JVM []JVMCategoryStats

	// Regions are the tracked anonymous mappings, sorted, and RegionSites
	// the index in Sites of each one's site: what a footprint reading
	// needs to split mappings by call site.
	Regions     []footprint.Range
	RegionSites []int
	// Footprint is the kernel's reading of the process's memory, taken by
	// the session (not the Table) at the report or at its exit; nil
	// without one. MappedState sums the Mapped sites' Mapping.
	Footprint   *footprint.Reading
	MappedState footprint.State
}

// Snapshot is a deep copy of a Table: reports are built from it, never from
// the live Table.
type Snapshot struct {
	// Time is the kernel monotonic time (ns) of the newest event applied.
	Time      uint64
	Processes []ProcessSnapshot
	// LostEvents is the run's total of lost events, all processes included.
	LostEvents uint64
	// SampleBytes is the sampling mean in bytes when the heap figures are
	// estimates from samples (see SampleWeight); 0 when they are exact.
	SampleBytes uint64
	// Marks are the marks seen so far, oldest first (marks.go).
	Marks []Mark
}

// SetFootprint attaches a reading taken with ps.Regions to ps and gives
// each Mapped site its ranges' states.
func (ps *ProcessSnapshot) SetFootprint(r footprint.Reading) {
	ps.Footprint = &r
	ps.MappedState = footprint.State{}
	for i := range ps.Sites {
		ps.Sites[i].Mapping = footprint.State{}
	}
	for i, st := range r.Ranges {
		if i >= len(ps.RegionSites) {
			break
		}
		m := &ps.Sites[ps.RegionSites[i]].Mapping
		m.Reserved += st.Reserved
		m.Committed += st.Committed
		m.Resident += st.Resident
		ps.MappedState.Reserved += st.Reserved
		ps.MappedState.Committed += st.Committed
		ps.MappedState.Resident += st.Resident
	}
}
