package symbolize

import (
	"cmp"
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
	mod := r.mods.opened(p.Dev, p.Ino)
	if mod == nil && strings.HasPrefix(p.Path, "/") {
		mod, _ = r.mods.module(p.Path, p.Ino, origin{modPath: p.Path, roots: []string{""}})
	}
	if mod == nil {
		return false
	}
	code, ok := mod.firstCode()
	if !ok {
		return false
	}
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
