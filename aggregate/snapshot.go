package aggregate

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
}

// ProcessSnapshot is one process's statistics at snapshot time.
type ProcessSnapshot struct {
	PID    uint32
	Comm   string
	Exited bool
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
