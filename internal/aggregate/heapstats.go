package aggregate

// HeapStats returns process pid's heap figures now (zero when it is not
// known): cheaper than a snapshot, for a caller that looks after every
// event (history's points of short runs).
func (t *Table) HeapStats(pid uint32) Stats {
	if p := t.procs[pid]; p != nil {
		return p.heap
	}
	return Stats{}
}
