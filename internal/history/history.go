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
//   - Mark(time, pid, label, src) for a named moment;
//   - After(e, src) with every event once the aggregate has applied it:
//     the points and heap-map moments that a run too short for its
//     periodic samples needs (see After);
//   - End(now, snap, blocks) once, at the end.
//
// Every point, mark and moment carries the process's heap turnover then
// (bytes allocated plus bytes freed, massif's --time-unit=B), so that a
// run whose wall time says nothing can be drawn against the bytes it
// turned over.
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
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
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
	// Young is how long after a process's first event After takes
	// points by turnover (default 1s): the periodic samples (every rate
	// period) draw the rest of a run.
	Young time.Duration
	// StepBytes is the first turnover between two of After's points
	// (default 64 KiB); it doubles every YoungPoints/4 points, and After
	// takes at most YoungPoints (default 512) per process.
	StepBytes   uint64
	YoungPoints int
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
	if o.Young <= 0 {
		o.Young = time.Second
	}
	if o.StepBytes == 0 {
		o.StepBytes = 64 << 10
	}
	if o.YoungPoints < 4 {
		o.YoungPoints = 512
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
	Turnover    uint64 // heap bytes allocated plus freed so far
	LiveBytes   uint64
	LiveBlocks  uint64
	MappedBytes uint64 // anonymous mappings (mmap) live
	// HeapResident is the allocator's memory in RAM (a Go program's Go
	// heap included), from the latest footprint reading at or before Time (readings are rarer than
	// samples); 0 before the first, which HeapRead tells apart from a
	// reading of 0.
	HeapResident uint64
	HeapRead     bool
	// ColdBytes is the live memory cold in the latest --access epoch
	// ended at or before Time (package access); ColdRead tells 0 before
	// the first from an epoch's 0.
	ColdBytes uint64
	ColdRead  bool
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
	Time     uint64
	Turnover uint64
	// Why says which moment it is: "mark", "peak", "end", several of
	// them ("mark, peak"), or "" for one taken every MapEvery.
	Why       string
	Runs      []Run // sorted by address
	LiveSizes SizeHistogram
	// Granule is the size of the cells runs are made of: each cell is
	// given to the site with most live bytes in it (see coarsen).
	Granule uint64
	// Cold, with --access, says per run whether its memory was cold at
	// the latest epoch (nil without --access).
	Cold []bool
}

// Mark is a named moment.
type Mark struct {
	Time     uint64
	Label    string
	Turnover uint64
}

// Peak is the highest live heap the aggregate measured (Bytes) and the
// sample with the most live bytes (Time): the two agree when the peak
// lasted a sampling period.
type Peak struct {
	Time     uint64
	Bytes    uint64
	Turnover uint64
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
	lastTime     uint64 // of the last point: points keep time order
	resident     uint64 // the latest reading's heap resident bytes
	read         bool   // a reading was seen
	cold         uint64 // the latest access epoch's cold bytes
	coldRead     bool   // an access epoch was seen
	// coldRange says whether a range's memory was cold at the latest
	// access epoch (ColdRanges).
	coldRange func(start, end uint64) (cold, known bool)

	// After's state: the first event's time, the young points taken,
	// their step and the turnover of the next one; the aggregate's peak
	// snapshots seen, and the heap map of the highest point so far
	// (peakMap, taken when live bytes top peakLive by 1/64).
	started    bool
	first      uint64
	young      int
	step, next uint64
	peakSnaps  uint64
	peakLive   uint64
	peakMap    *HeapMap
	markMaps   int // maps taken at marks (at most MaxMaps)
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

// Source is the aggregate as After, Mark and End read it
// (aggregate.Table is one).
type Source interface {
	BlockSource
	SnapshotOf(pid uint32) aggregate.Snapshot
	HeapStats(pid uint32) aggregate.Stats
	PeakSnapshots(pid uint32) uint64
}

// Mark records a named moment of process pid. With src, the moment gets
// a timeline point and a heap-map moment at once (for the first MaxMaps
// marks of a process; later ones, and all without src, make the next
// Sample take one).
func (c *Collector) Mark(t uint64, pid uint32, label string, src Source) {
	p := c.proc(pid)
	m := Mark{Time: t, Label: label}
	if src == nil || p.markMaps >= c.o.MaxMaps {
		if src != nil {
			m.Turnover = turnover(src.HeapStats(pid))
		}
		p.Marks = append(p.Marks, m)
		p.mapDue = true
		return
	}
	p.markMaps++
	snap := src.SnapshotOf(pid)
	if len(snap.Processes) == 0 {
		p.Marks = append(p.Marks, m)
		return
	}
	ps := &snap.Processes[0]
	m.Turnover = turnover(ps.Heap)
	p.Marks = append(p.Marks, m)
	c.point(p, ps, t, src, "mark")
}

// After takes event e, which the aggregate src has just applied, and
// adds what a short run needs beyond the periodic samples:
//   - while the process is young (Young since its first event), a point
//     every time its heap turnover has grown by a step;
//   - a point and a heap-map moment when its live heap tops the highest
//     point so far by 1/64 as the aggregate takes a new peak snapshot (the
//     last such moment is kept: the peak's).
//
// Every decision rests on the events alone, so a replay takes the same
// points as the live run.
func (c *Collector) After(e *event.Event, src Source) {
	switch e.Kind {
	case event.Alloc, event.Free, event.Realloc:
	default:
		return
	}
	p := c.proc(e.PID)
	if !p.started {
		p.started, p.first, p.step = true, e.Time, c.o.StepBytes
	}
	st := src.HeapStats(e.PID)
	tv := turnover(st)
	peak := false
	if n := src.PeakSnapshots(e.PID); n != p.peakSnaps {
		p.peakSnaps = n
		peak = st.LiveBytes > 0 && (p.peakMap == nil || st.LiveBytes >= p.peakLive+p.peakLive/64)
	}
	young := p.young < c.o.YoungPoints && e.Time-p.first < uint64(c.o.Young) && tv >= p.next
	if !young && !peak {
		return
	}
	if young {
		p.young++
		if p.young%(c.o.YoungPoints/4) == 0 {
			p.step *= 2
		}
		p.next = tv + p.step
	}
	snap := src.SnapshotOf(e.PID)
	if len(snap.Processes) == 0 {
		return
	}
	c.sampleBytes = snap.SampleBytes
	ps := &snap.Processes[0]
	p.Comm = ps.Comm
	c.point(p, ps, e.Time, src, "")
	if peak {
		m := p.heapMap(p.lastTime, tv, src, c.o)
		m.Why = "peak"
		p.peakMap, p.peakLive = &m, st.LiveBytes
	}
}

// End takes the last point of every process in snap, at now, and a
// heap-map moment of each that still has live blocks.
func (c *Collector) End(now uint64, snap aggregate.Snapshot, blocks BlockSource) {
	c.sampleBytes = snap.SampleBytes
	for i := range snap.Processes {
		ps := &snap.Processes[i]
		p := c.proc(ps.PID)
		p.Comm = ps.Comm
		why := "end"
		if ps.Heap.LiveAllocs == 0 || blocks == nil {
			why = ""
		}
		c.point(p, ps, now, blocks, why)
	}
}

func turnover(s aggregate.Stats) uint64 { return s.AllocBytes + s.FreedBytes }

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
		c.point(p, ps, now, blocks, "")
	}
	c.evict(snap)
}

// point adds a timeline point of p at time t (or its last point's, if
// later) and takes a heap-map moment: always when why says which one it
// is, else when one is due.
func (c *Collector) point(p *proc, ps *aggregate.ProcessSnapshot, t uint64, blocks BlockSource, why string) {
	t = max(t, p.lastTime)
	p.lastTime = t
	s := c.sample(p, ps, t)
	if s.LiveBytes > p.maxLive || p.Peak.Time == 0 {
		p.maxLive, p.Peak.Time, p.Peak.Turnover = s.LiveBytes, s.Time, s.Turnover
	}
	p.Peak.Bytes = ps.PeakLiveBytes
	p.add(s, c.o.MaxSamples)
	if blocks == nil {
		return
	}
	if why != "" {
		if n := len(p.Maps); n > 0 && p.Maps[n-1].Turnover == s.Turnover && p.Maps[n-1].Why != "" {
			p.Maps[n-1].Why = joinWhy(p.Maps[n-1].Why, why) // the same heap: nothing was allocated or freed since
			return
		}
		p.takeMap(s.Time, s.Turnover, blocks, c.o, why)
		p.peakCandidate(s.LiveBytes)
		return
	}
	// An empty heap (a process not yet started) is no moment to show.
	if !ps.Exited && s.LiveBytes > 0 && (!p.hasMap || p.mapDue || s.Time-p.lastMap >= p.mapEvery) {
		p.takeMap(s.Time, s.Turnover, blocks, c.o, "")
		p.peakCandidate(s.LiveBytes)
	}
}

// peakCandidate makes the heap-map moment just taken the peak's when its
// live bytes are the highest a moment has had: a mark at the peak gives
// the peak's exact moment.
func (p *proc) peakCandidate(live uint64) {
	if p.peakMap != nil && live >= p.peakLive {
		m := p.Maps[len(p.Maps)-1]
		m.Why = "peak"
		p.peakMap, p.peakLive = &m, live
	}
}

func joinWhy(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b || strings.Contains(a, b):
		return a
	}
	return a + ", " + b
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

// Cold gives pid's latest access epoch's cold bytes (--access): the
// samples from now on carry them.
func (c *Collector) Cold(pid uint32, cold uint64) {
	p := c.proc(pid)
	p.cold, p.coldRead = cold, true
}

// ColdRanges gives pid's heap maps, from now on, which runs were cold
// (--access; cold reports it for a range, known whether it was read).
func (c *Collector) ColdRanges(pid uint32, cold func(start, end uint64) (cold, known bool)) {
	c.proc(pid).coldRange = cold
}

func (c *Collector) sample(p *proc, ps *aggregate.ProcessSnapshot, t uint64) Sample {
	if ps.Footprint != nil {
		// A Go program's heap is its allocator's too.
		p.resident = ps.Footprint.HeapResident + ps.Footprint.GoHeap.Resident
		p.read = true
	}
	s := Sample{Time: t, Turnover: turnover(ps.Heap), LiveBytes: ps.Heap.LiveBytes, LiveBlocks: ps.Heap.LiveAllocs,
		MappedBytes: ps.Mapped.LiveBytes, HeapResident: p.resident, HeapRead: p.read, ColdBytes: p.cold, ColdRead: p.coldRead,
		Rates: ps.Rates}
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

func (p *proc) takeMap(t, turnover uint64, blocks BlockSource, o Options, why string) {
	m := p.heapMap(t, turnover, blocks, o)
	m.Why = why
	p.Maps = append(p.Maps, m)
	p.lastMap, p.hasMap, p.mapDue = t, true, false
	if len(p.Maps) > o.MaxMaps {
		// Drop every other periodic moment but the newest; space them
		// twice as far. Moments with a reason (marks, the end) stay.
		kept := p.Maps[:0]
		periodic := 0
		for i, mm := range p.Maps {
			if mm.Why == "" {
				periodic++
			}
			if mm.Why != "" || periodic%2 == 1 || i == len(p.Maps)-1 {
				kept = append(kept, mm)
			}
		}
		p.Maps = kept
		p.mapEvery *= 2
	}
}

// heapMap draws the process's live blocks now.
func (p *proc) heapMap(t, turnover uint64, blocks BlockSource, o Options) HeapMap {
	bs := make([]block, 0, p.lastBlocks)
	m := HeapMap{Time: t, Turnover: turnover}
	blocks.ForEachLiveSite(p.PID, func(addr, size uint64, k aggregate.SiteKey) bool {
		bs = append(bs, block{addr, addr + max(size, 1), p.site(k)})
		m.LiveSizes.add(size)
		return true
	})
	p.lastBlocks = len(bs)
	slices.SortFunc(bs, func(a, b block) int { return cmp.Compare(a.addr, b.addr) })
	m.Runs, m.Granule = coarsen(bs, o.MaxRuns, p.granule)
	p.granule = m.Granule
	if p.coldRange != nil {
		m.Cold = make([]bool, len(m.Runs))
		for i, r := range m.Runs {
			m.Cold[i], _ = p.coldRange(r.Start, r.End)
		}
	}
	return m
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
		q := p.Process
		q.Maps = withPeak(q.Maps, p.peakMap)
		h.Processes = append(h.Processes, q)
	}
	slices.SortFunc(h.Processes, func(a, b Process) int { return cmp.Compare(a.PID, b.PID) })
	return h
}

// withPeak returns maps with the peak's moment in its place by turnover
// (a new list), or the moment there already, now saying it is the peak's.
func withPeak(maps []HeapMap, peak *HeapMap) []HeapMap {
	if peak == nil {
		return maps
	}
	i, found := slices.BinarySearchFunc(maps, peak.Turnover, func(m HeapMap, tv uint64) int { return cmp.Compare(m.Turnover, tv) })
	out := slices.Clone(maps)
	if found {
		out[i].Why = joinWhy(out[i].Why, "peak")
		return out
	}
	return slices.Insert(out, i, *peak)
}
