package aggregate

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

// peakState is a process's kept snapshot.
type peakState struct {
	taken bool
	time  uint64
	live  uint64
	stats []Stats // by site index; sites newer than the snapshot had nothing
	count uint64  // snapshots taken
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
	live := p.heap.LiveBytes
	ps := &p.peak
	if ps.taken && live <= ps.live {
		return
	}
	if ps.taken && live-ps.live <= t.peakTol.of(p.peakHeap) {
		return
	}
	ps.taken, ps.time, ps.live = true, now, live
	ps.count++
	ps.stats = ps.stats[:0]
	for i := range p.sites {
		ps.stats = append(ps.stats, p.sites[i].stats)
	}
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
	for i, st := range ps.stats {
		s := p.sites[i]
		if s.cat != Heap || st.LiveBytes == 0 {
			continue
		}
		out.Sites = append(out.Sites, SiteSnapshot{Address: s.addr, StackID: s.stack, Category: Heap, Stats: st})
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
