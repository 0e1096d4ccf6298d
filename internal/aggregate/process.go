package aggregate

// process is everything a Table keeps for one PID.
type process struct {
	pid      uint32
	comm     string
	exited   bool
	exitTime uint64

	heap           Stats // sums over the Heap sites, kept incrementally
	peakHeap       uint64
	unmatchedFrees uint64
	lost           uint64

	mapped     Stats // sums over the Mapped sites
	peakMapped uint64

	resident residentPages // sampled faults' pages still resident (resident.go)

	// sites is indexed by the uint32 that live blocks and regions carry
	// instead of the call site itself: 4 bytes per block instead of 9.
	sites       []site
	heapSites   map[siteID]uint32 // call site -> index in sites
	mappedSites map[siteID]uint32

	live    liveTable
	regions regionSet
	// poolSize is pymalloc's pool size once the process has opened a pool
	// (event.FuncPyPool): an unmapped arena frees the pools it held.
	poolSize uint64

	// unmapSeq numbers the unmapping calls, so that a call releasing
	// several regions of one site counts as one Free for it.
	unmapSeq uint64

	peak  peakState // the peak snapshot (peak.go)
	marks uint64    // marks seen (marks.go)
	// The peak snapshot, copy-on-write (peak.go), by site index, apart
	// from sites so that the hot path's sites stay small: peakStats[i] are
	// site i's figures at snapshot number peakSeq[i], saved at its first
	// change since.
	peakSeq   []uint64
	peakStats []Stats

	// est holds the weighted sums of sampled mode (estimate.go); nil when exact.
	est *procEstimate
	// parts is the per-stack breakdown of the heap sites (stack_parts.go);
	// nil without SetStackBreakdown.
	parts *stackParts

	// leaf is the current event's leaf call site, kept by a site it creates.
	leaf uint64
	// jvmNames name the JVM's categories (SetJVMCategories); nil: no JVM.
	jvmNames []string
}

// siteID identifies a call site: the return address into the allocator's
// caller, in --detail mode the id of the whole user stack (-1 without),
// and in a JVM the NMT category of its allocations (event.JVMCategory): a
// site whose calls ask for two categories is two sites.
type siteID struct {
	addr  uint64
	stack int32
	jvm   uint8
}

// site is one (call site, category) pair's statistics.
type site struct {
	addr      uint64
	leaf      uint64 // the allocator's immediate caller, as first seen
	stack     int32
	jvm       uint8 // event.JVMCategory
	cat       Category
	noTable   bool // some events were charged before their file's unwind table (event.NoTable)
	stats     Stats
	lastUnmap uint64 // unmapSeq of the last unmapping call counted in stats.Frees
}

func newProcess(pid uint32) *process {
	return &process{
		pid:         pid,
		heapSites:   make(map[siteID]uint32),
		mappedSites: make(map[siteID]uint32),
	}
}

// siteIndex returns the index of (addr, cat), creating the site if new.
func (p *process) siteIndex(key siteID, cat Category) uint32 {
	idx := p.heapSites
	if cat == Mapped {
		idx = p.mappedSites
	}
	if i, ok := idx[key]; ok {
		return i
	}
	i := uint32(len(p.sites))
	p.sites = append(p.sites, site{addr: key.addr, leaf: p.leaf, stack: key.stack, jvm: key.jvm, cat: cat})
	// New since the last peak snapshot: it held nothing then.
	p.peakSeq = append(p.peakSeq, p.peak.count)
	p.peakStats = append(p.peakStats, Stats{})
	idx[key] = i
	return i
}
