package aggregate

import "math"

// The peak snapshot: per process, a copy of every heap site's figures at
// a moment whose live bytes are within a tolerance T of the true peak. It
// follows IBM's rule for heap snapshots: a new snapshot is taken only when
// the live bytes could exceed the kept snapshot's by more than T. IBM
// bounds the live bytes by "live at the snapshot + bytes allocated since";
// here the live bytes are known exactly at every event, so the bound is
// the live bytes themselves, which takes fewer snapshots for the same
// guarantee: peak - T <= live at the snapshot <= peak.

// PeakTolerance is T: Bytes plus PPM millionths of the peak so far.
type PeakTolerance struct {
	Bytes uint64
	PPM   uint64
}

// DefaultPeakTolerance is 1% of the peak.
var DefaultPeakTolerance = PeakTolerance{PPM: 10000}

// of returns T for a peak of peak bytes.
func (t PeakTolerance) of(peak uint64) uint64 {
	if t.PPM == 0 {
		return t.Bytes
	}
	hi, lo := peak/1e6, peak%1e6
	return t.Bytes + hi*t.PPM + lo*t.PPM/1e6
}

// peakState is a process's kept snapshot. Taking one is O(1): the sites'
// figures at snapshot number count are their current ones, or, for a site
// changed since, the copy it saved at its first change (touch).
type peakState struct {
	taken bool
	time  uint64
	live  uint64
	// liveVar is the variance estimate of live (sampled mode; 0 when exact).
	liveVar float64
	count   uint64 // snapshots taken; the kept one is number count
	// next: live bytes above it take a new snapshot; live + T as of the
	// snapshot. T only grows with the peak, so the guarantee holds for
	// the T of any later peak too.
	next uint64
}

// touch saves site si's figures before their first change since the last
// snapshot: they are that snapshot's.
func (p *process) touch(si uint32) {
	if p.peakSeq[si] != p.peak.count {
		p.peakSeq[si], p.peakStats[si] = p.peak.count, p.sites[si].stats
		if p.est != nil {
			p.est.savePeak(si) // the standard error at the snapshot too (estimate.go)
		}
	}
}

// atPeak is site i's figures at the kept snapshot.
func (p *process) atPeak(i int) Stats {
	if p.peakSeq[i] == p.peak.count {
		return p.peakStats[i]
	}
	return p.sites[i].stats
}

// SetPeakTolerance sets T for every process. Call it before the events.
func (t *Table) SetPeakTolerance(tol PeakTolerance) {
	t.peakTol = tol
	if t.obs != nil {
		t.obs.PeakTolerance(tol)
	}
}

// checkPeak takes a new snapshot of p when its live heap bytes exceed the
// kept snapshot's by more than T.
func (t *Table) checkPeak(p *process, now uint64) {
	ps := &p.peak
	live := p.heap.LiveBytes
	if ps.taken && live <= ps.next {
		return
	}
	ps.taken, ps.time, ps.live = true, now, live
	if p.est != nil {
		ps.liveVar = p.est.heap.liveVar
	}
	ps.next = live + t.peakTol.of(p.peakHeap)
	if ps.next < live {
		ps.next = ^uint64(0) // T so large it overflows: one snapshot is enough
	}
	ps.count++ // every site's current figures are now the snapshot's
}

// PeakSnapshot is a process's heap as of its peak snapshot.
type PeakSnapshot struct {
	// Time is the kernel monotonic time (ns) of the event that made it.
	Time uint64
	// LiveBytes is the heap's live bytes then; PeakLiveBytes - Tolerance
	// <= LiveBytes <= PeakLiveBytes (the process's).
	LiveBytes uint64
	// Tolerance is T for the process's peak (PeakTolerance).
	Tolerance uint64
	// Snapshots counts the snapshots taken for the process.
	Snapshots uint64
	// LiveBytesStderr is the standard error of LiveBytes in sampled mode
	// (the Table's SampleBytes > 0: every figure here is an estimate); 0
	// when exact.
	LiveBytesStderr float64
	// Sites are the heap sites live then (LiveBytes > 0), with their
	// figures then; rates are not kept.
	Sites []SiteSnapshot
}

func (p *process) peakSnapshot(tol PeakTolerance) *PeakSnapshot {
	ps := &p.peak
	if !ps.taken {
		return nil
	}
	out := &PeakSnapshot{Time: ps.time, LiveBytes: ps.live, Tolerance: tol.of(p.peakHeap), Snapshots: ps.count}
	if p.est != nil {
		out.LiveBytesStderr = math.Sqrt(max(ps.liveVar, 0))
	}
	for i := range p.sites {
		s := &p.sites[i]
		if s.cat != Heap {
			continue
		}
		if st := p.atPeak(i); st.LiveBytes > 0 {
			site := SiteSnapshot{Address: s.addr, StackID: s.stack, Category: Heap, Stats: st, JVMCategory: p.jvmName(s.jvm)}
			if p.est != nil {
				site.LiveBytesStderr = p.est.peakStderr(p, i)
			}
			out.Sites = append(out.Sites, site)
		}
	}
	return out
}

// PeakSnapshots counts the peak snapshots taken for pid so far.
func (t *Table) PeakSnapshots(pid uint32) uint64 {
	if p := t.procs[pid]; p != nil {
		return p.peak.count
	}
	return 0
}
