package symbolize

// process is one capture of a process's code mappings. maps is never
// changed after the capture; a new capture replaces the whole process.
type process struct {
	maps []codeMapping // sorted by start, non-overlapping

	// Guarded by Resolver.mu: exited stops recaptures once the process is
	// known gone; misses are addresses a fresh capture did not cover, so a
	// stray address does not trigger a capture on every lookup.
	exited bool
	misses map[uint64]struct{}
}

// codeMapping is an executable mapping and its module (nil when the file
// could not be read, or for pseudo mappings such as [vdso]).
type codeMapping struct {
	start, end, offset uint64
	path               string
	mod                *Module
}

// find returns the mapping holding pc.
func (p *process) find(pc uint64) (*codeMapping, bool) {
	i := searchLast(len(p.maps), func(i int) bool { return p.maps[i].start <= pc })
	if i < 0 || pc >= p.maps[i].end {
		return nil, false
	}
	return &p.maps[i], true
}

// frame resolves pc, which lies in m, reporting it as return address ret.
func (m *codeMapping) frame(ret, pc uint64) Frame {
	fr := Frame{Address: ret, Module: m.path, Offset: pc - m.start + m.offset}
	if m.mod == nil {
		return fr
	}
	vaddr, ok := m.mod.VAddr(fr.Offset)
	if !ok {
		return fr
	}
	fr.Offset = vaddr
	fr.Function = m.mod.Function(vaddr)
	fr.File, fr.Line = m.mod.Line(vaddr)
	return fr
}
