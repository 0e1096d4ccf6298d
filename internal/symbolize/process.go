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

// module is the module to resolve in: with its debuginfod download once
// there (fetched.go).
func (m *codeMapping) module() *Module { return m.mod.latest() }

// find returns the mapping holding pc.
func (p *process) find(pc uint64) (*codeMapping, bool) {
	i := searchLast(len(p.maps), func(i int) bool { return p.maps[i].start <= pc })
	if i < 0 || pc >= p.maps[i].end {
		return nil, false
	}
	return &p.maps[i], true
}

// frame resolves the return address ret, whose call lies in m (pc = ret-1
// does).
func (m *codeMapping) frame(ret, pc uint64) Frame {
	fr := Frame{Address: ret, CallAddress: pc, Module: m.path, Offset: pc - m.start + m.offset}
	if m.mod == nil {
		return fr
	}
	mod := m.module()
	vaddr, ok := mod.VAddr(fr.Offset)
	if !ok {
		return fr
	}
	s := mod.siteAt(vaddr + 1)
	fr.CallAddress = ret - (vaddr + 1 - s.call)
	fr.Offset = s.call
	fr.Function, fr.File, fr.Line, fr.Inlined = s.function, s.file, s.line, s.inlined
	return fr
}
