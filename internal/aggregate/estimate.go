package aggregate

import "math"

// Sampled mode. The probes sample allocations as a Poisson process over
// the bytes each thread allocates, with on average one point per N bytes
// (N = the Table's SampleBytes): an allocation of s bytes is sampled when
// a point falls in it, with probability
//
//	p(s) = 1 - e^(-s/N)
//
// independently of every other allocation, and only sampled allocations
// (and the frees of sampled blocks) reach the Table. Each sample then
// stands for w(s) = 1/p(s) allocations of its size (Horvitz–Thompson):
// the sum of w·s over the sampled blocks still live is an unbiased
// estimate of the live bytes, and likewise for blocks (w), bytes and
// blocks allocated and freed. Its variance is Σ s²·(1-p)/p over all live
// blocks, which the sum of s²·(1-p)/p² = s²·w·(w-1) over the sampled live
// blocks estimates without bias; its square root is the standard error.
// A zero-size block counts as one byte, as the probes count it.

// SampleWeight is w(size) = 1/(1 - e^(-size/n)) for a sampling mean of n
// bytes: how many allocations of that size one sample stands for.
func SampleWeight(size, n uint64) float64 {
	if n == 0 {
		return 1
	}
	s := float64(max(size, 1))
	return 1 / -math.Expm1(-s/float64(n))
}

// estSums are the weighted sums behind one site's (or a process's)
// estimates. The Stats beside them hold the same figures rounded, so that
// everything reading Stats (reports, rates, rankings) reads estimates.
type estSums struct {
	allocs, allocBytes    float64
	frees, freedBytes     float64
	liveAllocs, liveBytes float64
	// liveVar estimates the variance of liveBytes.
	liveVar float64
	// sampled counts the sampled blocks live: when it falls to 0 the live
	// sums are exactly 0, whatever rounding left in them.
	sampled int64
}

func (e *estSums) add(size, w float64) {
	e.allocs += w
	e.allocBytes += w * size
	e.liveAllocs += w
	e.liveBytes += w * size
	e.liveVar += size * size * w * (w - 1)
	e.sampled++
}

func (e *estSums) remove(size, w float64) {
	e.frees += w
	e.freedBytes += w * size
	e.sampled--
	if e.sampled <= 0 {
		e.sampled, e.liveAllocs, e.liveBytes, e.liveVar = 0, 0, 0, 0
		return
	}
	e.liveAllocs -= w
	e.liveBytes -= w * size
	e.liveVar -= size * size * w * (w - 1)
}

// store writes the rounded estimates into st.
func (e *estSums) store(st *Stats) {
	st.Allocs = round(e.allocs)
	st.AllocBytes = round(e.allocBytes)
	st.Frees = round(e.frees)
	st.FreedBytes = round(e.freedBytes)
	st.LiveAllocs = round(e.liveAllocs)
	st.LiveBytes = round(e.liveBytes)
}

func (e *estSums) stderr() float64 { return math.Sqrt(max(e.liveVar, 0)) }

func round(x float64) uint64 {
	if !(x > 0) {
		return 0
	}
	if x >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Round(x))
}

// procEstimate is a process's sampled-mode state.
type procEstimate struct {
	n     uint64
	heap  estSums
	sites []estSums // by site index; mapped sites stay zero (mmaps are not sampled)
	// peakVar[i] is site i's liveVar saved with its figures at the peak
	// snapshot (peak.go: touch), read where peakStats[i] is.
	peakVar []float64
	// exact allocation counts, counted by the probes (SetExactCounts).
	exact                   bool
	exactAllocs, exactBytes uint64
}

func (e *procEstimate) site(i uint32) *estSums {
	for int(i) >= len(e.sites) {
		e.sites = append(e.sites, estSums{})
	}
	return &e.sites[i]
}

// savePeak saves site si's variance before its first change since the
// peak snapshot.
func (e *procEstimate) savePeak(si uint32) {
	for int(si) >= len(e.peakVar) {
		e.peakVar = append(e.peakVar, 0)
	}
	var v float64
	if int(si) < len(e.sites) {
		v = e.sites[si].liveVar
	}
	e.peakVar[si] = v
}

// peakStderr is site i's standard error at the peak snapshot.
func (e *procEstimate) peakStderr(p *process, i int) float64 {
	var v float64
	switch {
	case p.peakSeq[i] != p.peak.count:
		if i < len(e.sites) {
			v = e.sites[i].liveVar // unchanged since the snapshot
		}
	case i < len(e.peakVar):
		v = e.peakVar[i]
	}
	return math.Sqrt(max(v, 0))
}

// alloc accounts a sampled heap block of size bytes at site si.
func (e *procEstimate) alloc(p *process, si uint32, size uint64) {
	s, w := estWeighed(size, e.n)
	st := e.site(si)
	st.add(s, w)
	st.store(&p.sites[si].stats)
	e.heap.add(s, w)
	e.heap.store(&p.heap)
	if p.heap.LiveBytes > p.peakHeap {
		p.peakHeap = p.heap.LiveBytes
	}
}

// estWeighed is a sampled block's size for the sums and its weight: a
// zero-size block weighs as one byte and holds none.
func estWeighed(size, n uint64) (s, w float64) {
	return float64(size), SampleWeight(size, n)
}

// release accounts a sampled heap block leaving the live set.
func (e *procEstimate) release(p *process, b liveBlock) {
	s, w := estWeighed(b.size, e.n)
	st := e.site(b.site)
	st.remove(s, w)
	st.store(&p.sites[b.site].stats)
	e.heap.remove(s, w)
	e.heap.store(&p.heap)
}

// SetSampleBytes tells the Table that the events are sampled with a mean
// of n bytes (0: exact, every call is an event). Call it before applying
// events: heap figures then become estimates (see SampleWeight).
func (t *Table) SetSampleBytes(n uint64) {
	if t.obs != nil {
		t.obs.SampleBytes(n)
	}
	t.sampleBytes = n
	for _, p := range t.procs {
		t.initEstimate(p)
	}
}

// SampleBytes returns the sampling mean (0 = exact).
func (t *Table) SampleBytes() uint64 { return t.sampleBytes }

func (t *Table) initEstimate(p *process) {
	if t.sampleBytes > 0 && p.est == nil {
		p.est = &procEstimate{n: t.sampleBytes}
	}
}

// SetExactCounts records pid's exact allocation calls and bytes, which
// the probes count in sampled mode; snapshots report them instead of the
// estimates. It registers pid if new: a process whose allocations were
// all unsampled is still reported.
func (t *Table) SetExactCounts(pid uint32, allocs, allocBytes uint64) {
	if t.obs != nil {
		t.obs.ExactCounts(pid, allocs, allocBytes)
	}
	p := t.proc(pid)
	if p.est == nil {
		return
	}
	p.est.exact, p.est.exactAllocs, p.est.exactBytes = true, allocs, allocBytes
}

// Known reports whether the Table holds pid.
func (t *Table) Known(pid uint32) bool {
	_, ok := t.procs[pid]
	return ok
}

// Processes returns the PIDs the Table holds, in no particular order.
func (t *Table) Processes() []uint32 {
	out := make([]uint32, 0, len(t.procs))
	for pid := range t.procs {
		out = append(out, pid)
	}
	return out
}

// fillEstimate adds the sampled-mode figures to a process's snapshot.
func (e *procEstimate) fill(ps *ProcessSnapshot) {
	if e == nil {
		return
	}
	ps.SampleBytes = e.n
	ps.LiveBytesStderr = e.heap.stderr()
	if e.exact {
		ps.CountsExact = true
		ps.Heap.Allocs, ps.Heap.AllocBytes = e.exactAllocs, e.exactBytes
	}
	for i := range ps.Sites {
		if i < len(e.sites) && ps.Sites[i].Category == Heap {
			ps.Sites[i].LiveBytesStderr = e.sites[i].stderr()
		}
	}
}
