// Package history keeps what a run looked like over time, for pictures
// that need more than the final snapshot (the HTML report's timeline, rate
// curves, heap map and size histograms). It is fed, in time order, from the
// same places the aggregate is:
//
//   - Observe(e) with every event applied to the aggregate (allocation
//     sizes; marks, once events carry them);
//   - Sample(now, snap, blocks) every period with the time (kernel
//     monotonic ns for a live run, the recording's clock for a replay: the
//     snapshot's own Time is that of its newest event, which stands still
//     while a process is idle), a snapshot of the aggregate
//     (aggregate.Table.Snapshot) and, optionally, the table itself as a
//     BlockSource, from which it takes heap-map moments of its own choosing;
//   - Mark(time, pid, label) for a named moment.
//
// A live run calls them from its session loop; a replayed recording calls
// them from its own loop, with the event times of the recording, and gets
// the same history. Collector is not safe for concurrent use.
//
// Memory stays bounded however long the run: the timeline keeps at most
// MaxSamples points (when full, neighbours are merged, keeping the one with
// more live bytes, so peaks survive), and the heap map at most MaxMaps
// moments of at most MaxRuns address runs each.
package history

import (
	"cmp"
	"math/bits"
	"slices"
	"time"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/event"
)

// BlockSource lists a process's live heap blocks (aggregate.Table does).
type BlockSource interface {
	ForEachLiveSite(pid uint32, fn func(addr, size uint64, site aggregate.SiteKey) bool)
}

// Options bound what a Collector keeps; zero fields take the defaults.
type Options struct {
	MaxSamples int // timeline points per process (default 2000)
	MaxMaps    int // heap-map moments per process (default 40)
	MaxRuns    int // address runs per heap-map moment (default 2000)
	MaxSites   int // call sites kept per timeline point (default 32)
	// MaxProcesses bounds the processes kept (default 100): past it, the
	// gone process (absent from the latest snapshot) whose heap was
	// smallest is dropped, so a whole-host run stays bounded too.
	MaxProcesses int
	MapEvery     time.Duration // first spacing of heap-map moments (default 250ms; doubles when full)
}

func (o *Options) defaults() {
	if o.MaxSamples <= 0 {
		o.MaxSamples = 2000
	}
	if o.MaxMaps <= 0 {
		o.MaxMaps = 40
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 2000
	}
	if o.MaxSites <= 0 {
		o.MaxSites = 32
	}
	if o.MapEvery <= 0 {
		o.MapEvery = 250 * time.Millisecond
	}
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = 100
	}
}

// SizeBuckets is the length of the size histograms: bucket i counts
// sizes s with bits.Len64(s) == i, i.e. [2^(i-1), 2^i), bucket 0 size 0.
const SizeBuckets = 65

// SizeHistogram counts blocks by size, in powers of two.
type SizeHistogram [SizeBuckets]uint64

func (h *SizeHistogram) add(size uint64) { h[bits.Len64(size)]++ }

// Sample is one timeline point of one process.
type Sample struct {
	Time        uint64 // kernel monotonic ns
	LiveBytes   uint64
	LiveBlocks  uint64
	MappedBytes uint64 // anonymous mappings (mmap) live
	// HeapResident is the allocator's memory in RAM, from the latest
	// footprint reading at or before Time (readings are rarer than
	// samples); 0 before the first.
	HeapResident uint64
	// Sites holds the live bytes of the largest call sites at this moment
	// (at most MaxSites), by index into Process.Sites; a call site broken
	// down by stack (aggregate.SiteSnapshot.Stacks) is one entry per stack.
	Sites map[int]uint64
	Rates []aggregate.RateSnapshot
}

// Run is a stretch of address space [Start, End) whose cells hold mostly
// live blocks of one call site (Site indexes Process.Sites).
type Run struct {
	Start, End uint64
	Site       int
}

// HeapMap is the heap at one moment: where the live blocks were.
type HeapMap struct {
	Time      uint64
	Runs      []Run // sorted by address
	LiveSizes SizeHistogram
	// Granule is the size of the cells runs are made of: each cell is
	// given to the site with most live bytes in it (see coarsen).
	Granule uint64
}

// Mark is a named moment.
type Mark struct {
	Time  uint64
	Label string
}

// Peak is the highest live heap the aggregate measured (Bytes) and the
// sample with the most live bytes (Time): the two agree when the peak
// lasted a sampling period.
type Peak struct {
	Time  uint64
	Bytes uint64
}

// Process is one process's history.
type Process struct {
	PID        uint32
	Comm       string
	Sites      []aggregate.SiteKey
	Samples    []Sample
	Maps       []HeapMap
	Marks      []Mark
	Peak       Peak
	AllocSizes SizeHistogram // every allocation's size (realloc's new size)
}

// History is everything collected, processes by PID.
type History struct {
	Processes   []Process
	SampleBytes uint64
}

// Collector builds a History.
type Collector struct {
	o           Options
	procs       map[uint32]*proc
	sampleBytes uint64
}

type proc struct {
	Process
	siteIdx map[aggregate.SiteKey]int
	// stride: one point kept per stride samples; pending is the best of
	// the current stride.
	stride, seen int
	pending      *Sample
	mapEvery     uint64
	lastMap      uint64
	hasMap       bool
	maxLive      uint64
	mapDue       bool   // a mark asked for a heap-map moment
	granule      uint64 // of the last heap-map moment
	lastBlocks   int    // blocks in the last heap-map moment
	resident     uint64 // the latest reading's heap resident bytes
}

// New returns an empty Collector.
func New(o Options) *Collector {
	o.defaults()
	return &Collector{o: o, procs: map[uint32]*proc{}}
}

func (c *Collector) proc(pid uint32) *proc {
	p := c.procs[pid]
	if p == nil {
		p = &proc{Process: Process{PID: pid}, siteIdx: map[aggregate.SiteKey]int{}, stride: 1,
			mapEvery: uint64(c.o.MapEvery)}
		c.procs[pid] = p
	}
	return p
}

// Observe takes one event of the stream.
func (c *Collector) Observe(e *event.Event) {
	switch e.Kind {
	case event.Alloc:
		c.proc(e.PID).AllocSizes.add(e.Size)
	case event.Realloc:
		if e.Addr != 0 {
			c.proc(e.PID).AllocSizes.add(e.Size)
		}
	}
}

// Mark records a named moment of process pid; the next Sample takes a
// heap-map moment, so the map can be seen at each mark.
func (c *Collector) Mark(t uint64, pid uint32, label string) {
	p := c.proc(pid)
	p.Marks = append(p.Marks, Mark{t, label})
	p.mapDue = true
}

// Sample takes a snapshot of the aggregate at time now; blocks (may be
// nil) gives the heap map when a moment is due.
func (c *Collector) Sample(now uint64, snap aggregate.Snapshot, blocks BlockSource) {
	c.sampleBytes = snap.SampleBytes
	for i := range snap.Processes {
		ps := &snap.Processes[i]
		p := c.proc(ps.PID)
		p.Comm = ps.Comm
		if ps.Exited && len(p.Samples) > 0 && p.pending == nil && p.Samples[len(p.Samples)-1].Time >= ps.ExitTime {
			continue // nothing new since it exited
		}
		s := c.sample(p, ps, now)
		if s.LiveBytes > p.maxLive || p.Peak.Time == 0 {
			p.maxLive, p.Peak.Time = s.LiveBytes, s.Time
		}
		p.Peak.Bytes = ps.PeakLiveBytes
		p.add(s, c.o.MaxSamples)
		if blocks != nil && !ps.Exited && (!p.hasMap || p.mapDue || s.Time-p.lastMap >= p.mapEvery) {
			p.takeMap(s.Time, blocks, c.o)
		}
	}
	c.evict(snap)
}

// evict drops gone processes, smallest heap first, down to MaxProcesses.
func (c *Collector) evict(snap aggregate.Snapshot) {
	if len(c.procs) <= c.o.MaxProcesses {
		return
	}
	present := map[uint32]bool{}
	for _, ps := range snap.Processes {
		present[ps.PID] = true
	}
	var gone []*proc
	for pid, p := range c.procs {
		if !present[pid] {
			gone = append(gone, p)
		}
	}
	slices.SortFunc(gone, func(a, b *proc) int { return cmp.Compare(a.maxLive, b.maxLive) })
	for _, p := range gone {
		if len(c.procs) <= c.o.MaxProcesses {
			return
		}
		delete(c.procs, p.PID)
	}
}

func (c *Collector) sample(p *proc, ps *aggregate.ProcessSnapshot, t uint64) Sample {
	if ps.Footprint != nil {
		p.resident = ps.Footprint.HeapResident
	}
	s := Sample{Time: t, LiveBytes: ps.Heap.LiveBytes, LiveBlocks: ps.Heap.LiveAllocs,
		MappedBytes: ps.Mapped.LiveBytes, HeapResident: p.resident, Rates: ps.Rates}
	// A site broken down by stack (sampled mode's stacks) counts as one
	// site per stack, as --detail's sites are: the flame graph draws
	// whole stacks, the timeline groups them back by call site.
	var heap []aggregate.SiteSnapshot
	for _, site := range ps.Sites {
		if site.Category != aggregate.Heap {
			continue
		}
		for _, st := range site.ByStack() {
			if st.LiveBytes > 0 {
				heap = append(heap, st)
			}
		}
	}
	slices.SortFunc(heap, func(a, b aggregate.SiteSnapshot) int { return cmp.Compare(b.LiveBytes, a.LiveBytes) })
	if len(heap) > c.o.MaxSites {
		heap = heap[:c.o.MaxSites]
	}
	s.Sites = make(map[int]uint64, len(heap))
	for _, st := range heap {
		s.Sites[p.site(st.Key())] = st.LiveBytes
	}
	return s
}

func (p *proc) site(k aggregate.SiteKey) int {
	if i, ok := p.siteIdx[k]; ok {
		return i
	}
	i := len(p.Sites)
	p.Sites = append(p.Sites, k)
	p.siteIdx[k] = i
	return i
}

// add keeps s, or the sample with more live bytes of its stride.
func (p *proc) add(s Sample, max int) {
	if p.pending == nil || s.LiveBytes >= p.pending.LiveBytes {
		p.pending = &s
	}
	p.seen++
	if p.seen < p.stride {
		return
	}
	p.Samples = append(p.Samples, *p.pending)
	p.pending, p.seen = nil, 0
	if len(p.Samples) < max {
		return
	}
	// Full: merge neighbours, keeping the higher; keep half as many from now on.
	kept := p.Samples[:0]
	for i := 0; i < len(p.Samples); i += 2 {
		best := p.Samples[i]
		if i+1 < len(p.Samples) && p.Samples[i+1].LiveBytes > best.LiveBytes {
			best = p.Samples[i+1]
		}
		kept = append(kept, best)
	}
	p.Samples = kept
	p.stride *= 2
}

// flush keeps the last pending sample (the run's end).
func (p *proc) flush() {
	if p.pending != nil {
		p.Samples = append(p.Samples, *p.pending)
		p.pending, p.seen = nil, 0
	}
}

func (p *proc) takeMap(t uint64, blocks BlockSource, o Options) {
	bs := make([]block, 0, p.lastBlocks)
	m := HeapMap{Time: t}
	blocks.ForEachLiveSite(p.PID, func(addr, size uint64, k aggregate.SiteKey) bool {
		bs = append(bs, block{addr, addr + max(size, 1), p.site(k)})
		m.LiveSizes.add(size)
		return true
	})
	p.lastBlocks = len(bs)
	slices.SortFunc(bs, func(a, b block) int { return cmp.Compare(a.addr, b.addr) })
	m.Runs, m.Granule = coarsen(bs, o.MaxRuns, p.granule)
	p.granule = m.Granule
	p.Maps = append(p.Maps, m)
	p.lastMap, p.hasMap, p.mapDue = t, true, false
	if len(p.Maps) > o.MaxMaps {
		// Drop every other moment but the newest; space them twice as far.
		kept := p.Maps[:0]
		for i, mm := range p.Maps {
			if i%2 == 0 || i == len(p.Maps)-1 {
				kept = append(kept, mm)
			}
		}
		p.Maps = kept
		p.mapEvery *= 2
	}
}

// block is a live block [addr, end) of a site.
type block struct {
	addr, end uint64
	site      int
}

// coarsen draws blocks (sorted, not overlapping) on a grid of cells of
// Granule bytes, the smallest power of two from 16 (a malloc chunk's
// header) up at which at most limit runs are left: each cell holding live
// bytes goes to the site with most bytes in it, and neighbouring cells of
// one site make one run. from is where the search starts (the previous
// moment's granule: a heap changes little between moments); the granule
// is halved while it still fits.
func coarsen(bs []block, limit int, from uint64) ([]Run, uint64) {
	g := max(from, 16)
	for g < 1<<40 && cells(bs, g, nil) > limit {
		g *= 2
	}
	for g > 16 && cells(bs, g/2, nil) <= limit {
		g /= 2
	}
	var runs []Run
	cells(bs, g, &runs)
	return runs, g
}

// cells counts the runs of blocks at granule g and, if out is not nil,
// appends them to it.
func cells(bs []block, g uint64, out *[]Run) int {
	n := 0
	var last Run
	emit := func(start, end uint64, site int) {
		if n > 0 && last.End == start && last.Site == site {
			last.End = end
			if out != nil {
				(*out)[len(*out)-1].End = end
			}
			return
		}
		n++
		last = Run{start, end, site}
		if out != nil {
			*out = append(*out, last)
		}
	}
	// The cell being filled: its index and bytes per site.
	type share struct {
		site  int
		bytes uint64
	}
	var cell uint64
	var shares []share
	flush := func() {
		if len(shares) == 0 {
			return
		}
		best := shares[0]
		for _, s := range shares[1:] {
			if s.bytes > best.bytes {
				best = s
			}
		}
		emit(cell*g, (cell+1)*g, best.site)
		shares = shares[:0]
	}
	add := func(c uint64, site int, n uint64) {
		if len(shares) > 0 && c != cell {
			flush()
		}
		cell = c
		for i := range shares {
			if shares[i].site == site {
				shares[i].bytes += n
				return
			}
		}
		shares = append(shares, share{site, n})
	}
	for _, b := range bs {
		first, last := b.addr/g, (b.end-1)/g
		if first == last {
			add(first, b.site, b.end-b.addr)
			continue
		}
		add(first, b.site, (first+1)*g-b.addr)
		flush()
		if last > first+1 {
			emit((first+1)*g, last*g, b.site)
		}
		add(last, b.site, b.end-last*g)
	}
	flush()
	return n
}

// History returns what was collected. The Collector can go on afterwards.
func (c *Collector) History() History {
	h := History{SampleBytes: c.sampleBytes}
	for _, p := range c.procs {
		p.flush()
		h.Processes = append(h.Processes, p.Process)
	}
	slices.SortFunc(h.Processes, func(a, b Process) int { return cmp.Compare(a.PID, b.PID) })
	return h
}
