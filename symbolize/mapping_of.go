package symbolize

// CodeMapping describes the executable mapping holding an address, for
// exporters that name mappings (pprof): where it lies, what file it maps
// and the file's build-id.
type CodeMapping struct {
	Start, End uint64 // [Start, End) in the process's address space
	Offset     uint64 // file offset mapped at Start
	Path       string
	// BuildID is the module's GNU build-id in lowercase hex, "" when the
	// file has none or could not be read.
	BuildID string
}

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
	cm := CodeMapping{Start: m.start, End: m.end, Offset: m.offset, Path: m.path}
	if m.mod != nil {
		cm.BuildID = m.mod.BuildID()
	}
	return cm, true
}
