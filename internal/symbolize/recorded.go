package symbolize

import (
	"cmp"
	"fmt"
	"slices"
)

// CodeMapping is one executable file mapping of a process as a recording
// keeps it (enough to resolve the process's addresses later, on this
// machine or another one holding the same files or their debug files) and
// as exporters that name mappings (pprof) see it.
type CodeMapping struct {
	Start, End, Offset uint64
	Path               string
	// BuildID is the module's GNU build-id ("" when unknown or none).
	BuildID string
}

// CodeMappings returns pid's code mappings as last captured, sorted by
// Start (nil when none).
func (r *Resolver) CodeMappings(pid int) []CodeMapping {
	r.mu.RLock()
	p := r.procs[pid]
	r.mu.RUnlock()
	if p == nil {
		return nil
	}
	out := make([]CodeMapping, 0, len(p.maps))
	for i := range p.maps {
		out = append(out, p.maps[i].export())
	}
	return out
}

// export is the mapping as exporters and recordings see it.
func (m *codeMapping) export() CodeMapping {
	cm := CodeMapping{Start: m.start, End: m.end, Offset: m.offset, Path: m.path}
	if m.mod != nil {
		cm.BuildID = m.mod.BuildID()
	}
	return cm
}

// OnChange makes the resolver call fn with a pid after each change of its
// mappings (a capture, a recapture after a miss, a dlopen'ed library). fn
// may be called from any goroutine that uses the resolver, and must not
// call back into it synchronously. Set it before the resolver is used.
func (r *Resolver) OnChange(fn func(pid int)) { r.changed = fn }

func (r *Resolver) noteChange(pid int) {
	if r.changed != nil {
		r.changed(pid)
	}
}

// Offline makes the resolver never read /proc: the processes it resolves
// for are recorded ones (AddCodeMappings), long gone or with their pid
// reused. Set it before the resolver is used.
func (r *Resolver) Offline() { r.offline = true }

// AddCodeMappings gives pid the recorded mappings maps, as Capture would
// have. Each module is opened by its path; one whose build-id differs
// from the recorded one is not used (its addresses resolve to path and
// offset only), and the returned error says which. Mappings already
// known for pid stay unless the new ones overlap them.
func (r *Resolver) AddCodeMappings(pid int, maps []CodeMapping) error {
	var add []codeMapping
	var mismatched []string
	for _, m := range maps {
		cm := codeMapping{start: m.Start, end: m.End, offset: m.Offset, path: m.Path}
		if m.Path != "" && m.Path[0] == '/' {
			if mod, err := r.mods.module(m.Path, 0, origin{modPath: m.Path, roots: []string{""}, ourPath: true}); err == nil {
				if m.BuildID == "" || mod.BuildID() == m.BuildID {
					cm.mod = mod
				} else {
					mismatched = append(mismatched, m.Path)
				}
			}
		}
		add = append(add, cm)
	}
	slices.SortFunc(add, func(a, b codeMapping) int { return cmp.Compare(a.start, b.start) })
	r.mu.Lock()
	p := &process{exited: r.offline}
	if old := r.procs[pid]; old != nil {
		p.maps = old.maps
	}
	p.maps = mergeMappings(p.maps, add)
	r.procs[pid] = p
	r.mu.Unlock()
	if len(mismatched) > 0 {
		return fmt.Errorf("process %d: %q differ from the recorded files (build-id)", pid, mismatched)
	}
	return nil
}

// RecordedJIT is one JIT symbol as a recording keeps it: a replay names
// the process's JIT code by it, as the live run did from the process's
// perf map or jitdump (File, as the process saw it).
type RecordedJIT struct {
	Start, Size uint64
	Name, File  string
}

// JITSymbolsFrom returns pid's JIT symbols read after the first from, in
// reading order (a later one is newer), and the count to pass next time.
func (r *Resolver) JITSymbolsFrom(pid, from int) ([]RecordedJIT, int) {
	s := r.jitSourceOf(pid, false)
	if s == nil {
		return nil, from
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	syms := s.table.syms
	if from >= len(syms) {
		return nil, len(syms)
	}
	out := make([]RecordedJIT, 0, len(syms)-from)
	for _, e := range syms[from:] {
		out = append(out, RecordedJIT{Start: e.start, Size: e.end - e.start, Name: e.name, File: e.file})
	}
	return out, len(syms)
}

// AddJITSymbols gives pid recorded JIT symbols, newer than those it has:
// its JIT code is named by them and never by reading files.
func (r *Resolver) AddJITSymbols(pid int, syms []RecordedJIT) {
	r.jitMu.Lock()
	if r.jits == nil {
		r.jits = map[int]*jitSource{}
	}
	s := r.jits[pid]
	if s == nil {
		s = &jitSource{pid: pid, log: r.log, recorded: true}
		r.jits[pid] = s
	}
	r.jitMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	// One add per file keeps the reading order within each.
	for i := 0; i < len(syms); {
		j := i
		for j < len(syms) && syms[j].File == syms[i].File {
			j++
		}
		batch := make([]JITSymbol, 0, j-i)
		for _, e := range syms[i:j] {
			batch = append(batch, JITSymbol{Start: e.Start, Size: e.Size, Name: e.Name})
		}
		s.addSyms(batch, syms[i].File)
		i = j
	}
}
