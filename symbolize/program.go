package symbolize

import (
	"cmp"
	"debug/elf"
	"slices"
	"strings"
)

// Program is the program a process executed, as its exec placed it
// (event.Program), named as the exec found it.
type Program struct {
	Path       string
	Start, End uint64 // the code's [start_code, end_code)
	Dev, Ino   uint64 // the file's device (stat(2)'s encoding) and inode
}

// AddProgram gives pid, gone before Capture could read its mappings, its
// program's code, so that call sites in the program still resolve (a
// short-lived process can exit before user space hears of its exec). The
// file is the module already opened for the same device and inode
// (through another process, or a probe), else the one at Path from our
// root if it has that inode. Libraries stay unresolved. It returns false
// when pid is captured already or the file is not found.
func (r *Resolver) AddProgram(pid int, p Program) bool {
	r.mu.RLock()
	_, known := r.procs[pid]
	r.mu.RUnlock()
	if known || p.End <= p.Start {
		return false
	}
	// The file must be the one loaded: its code as long as the range and
	// at the same place in a page.
	fits := func(m *Module) bool {
		code, ok := m.firstCode()
		return ok && code.vaddr%pageSize == p.Start%pageSize && m.codeEnd()-code.vaddr == p.End-p.Start
	}
	mod := r.mods.opened(p.Dev, p.Ino, fits)
	if mod == nil && strings.HasPrefix(p.Path, "/") {
		if m, err := r.mods.module(p.Path, p.Ino, origin{modPath: p.Path, roots: []string{""}}); err == nil && fits(m) {
			mod = m
		}
	}
	if mod == nil {
		return false
	}
	code, _ := mod.firstCode()
	proc := &process{exited: true, maps: []codeMapping{{start: p.Start, end: p.End, offset: code.off, path: p.Path, mod: mod}}}
	r.mu.Lock()
	if _, known := r.procs[pid]; known {
		r.mu.Unlock()
		return false
	}
	r.procs[pid] = proc
	r.mu.Unlock()
	r.noteChange(pid)
	return true
}

// firstCode is the executable segment with the lowest address: the ELF
// loader's start_code is its address plus the load bias.
func (m *Module) firstCode() (segment, bool) {
	if len(m.execSegs) == 0 {
		return segment{}, false
	}
	return slices.MinFunc(m.execSegs, func(a, b segment) int { return cmp.Compare(a.vaddr, b.vaddr) }), true
}

// codeEnd is where the executable segments' file bytes end: the ELF
// loader's end_code, less the load bias.
func (m *Module) codeEnd() uint64 {
	var end uint64
	if m.f == nil {
		return 0
	}
	for _, s := range m.f.Progs {
		if s.Type == elf.PT_LOAD && s.Flags&elf.PF_X != 0 {
			end = max(end, s.Vaddr+s.Filesz)
		}
	}
	return end
}
