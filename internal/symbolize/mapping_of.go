package symbolize

// MappingOf returns the captured executable mapping of pid holding pc (a
// code address: for a call site, the return address minus one). It does
// not capture again: call it after Resolve, which does when needed.
func (r *Resolver) MappingOf(pid int, pc uint64) (CodeMapping, bool) {
	r.mu.RLock()
	p := r.procs[pid]
	r.mu.RUnlock()
	if p == nil {
		return CodeMapping{}, false
	}
	m, ok := p.find(pc)
	if !ok {
		return CodeMapping{}, false
	}
	return m.export(), true
}
