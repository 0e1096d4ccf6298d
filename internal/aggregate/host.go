package aggregate

// Helpers of the whole-host mode, where processes come and go for days:
// each exited process is snapshotted alone, reported, and forgotten.

// SnapshotOf returns a snapshot holding pid alone (no process if the
// Table does not hold it), with its marks. Like Snapshot, it shares
// nothing with the Table.
func (t *Table) SnapshotOf(pid uint32) Snapshot {
	s := Snapshot{Time: t.newest, LostEvents: t.totalLost, SampleBytes: t.sampleBytes}
	if p := t.procs[pid]; p != nil {
		ps := p.snapshot()
		ps.Peak = p.peakSnapshot(t.peakTol)
		s.Processes = []ProcessSnapshot{ps}
		t.fillRates(s.Processes)
	}
	for _, m := range t.marks {
		if m.PID == pid {
			s.Marks = append(s.Marks, m)
		}
	}
	return s
}

// LiveAddrs returns the addresses of pid's live heap blocks (in sampled
// mode: the sampled ones, which the probes remember).
func (t *Table) LiveAddrs(pid uint32) []uint64 {
	p := t.procs[pid]
	if p == nil {
		return nil
	}
	out := make([]uint64, 0, p.live.len())
	p.live.each(func(addr uint64, _ liveBlock) bool {
		out = append(out, addr)
		return true
	})
	return out
}

// TotalLost is the run's total of dropped events (SetTotalLost).
func (t *Table) TotalLost() uint64 { return t.totalLost }
