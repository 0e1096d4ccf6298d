package symbolize

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Program is the program a process executed, as its exec placed it
// (event.Program), named as the exec found it.
type Program struct {
	Path       string
	Start, End uint64 // the code's [start_code, end_code)
	Dev, Ino   uint64 // the file as the kernel names it: device (stat(2)'s encoding) and inode
	Size       uint64 // the file's size; 0: unknown
}

// ErrNoProgramFile: no file known or at the program's name is the one the
// exec loaded.
var ErrNoProgramFile = errors.New("program file not found")

// AddProgram gives pid, gone before Capture could read its mappings, its
// program's code, so that call sites in the program still resolve (a
// short-lived process can exit before user space hears of its exec). The
// file is a module already opened for the same file (through another
// process, or a probe), else the one at Path from our root. Either must
// be the loaded file: its inode, size and device (sameDevice), and code
// of the loaded length at the same place in a page; a wrong name is worse
// than none. Libraries stay unresolved.
func (r *Resolver) AddProgram(pid int, p Program) error {
	r.mu.RLock()
	_, known := r.procs[pid]
	r.mu.RUnlock()
	if known {
		return fmt.Errorf("add program of process %d: mappings known already", pid)
	}
	if p.End <= p.Start {
		return fmt.Errorf("add program of process %d: empty code range", pid)
	}
	fits := func(m *Module) bool {
		code, ok := m.firstCode()
		return ok && code.vaddr%pageSize == p.Start%pageSize && m.codeEnd()-code.vaddr == p.End-p.Start
	}
	mod, path := r.mods.opened(p.Dev, p.Ino, p.Size, fits)
	if mod == nil {
		var err error
		if mod, err = r.programAt(p, fits); err != nil {
			return fmt.Errorf("add program %s of process %d: %w", p.Path, pid, err)
		}
	}
	if path == "" { // opened by its name, or through a process's root only
		path = p.Path
	}
	code, _ := mod.firstCode()
	maps := codeMappings(mod, p.Start-code.vaddr, path)
	slices.SortFunc(maps, func(a, b codeMapping) int { return cmp.Compare(a.start, b.start) })
	r.mu.Lock()
	if _, known := r.procs[pid]; known {
		r.mu.Unlock()
		return fmt.Errorf("add program of process %d: mappings known already", pid)
	}
	r.procs[pid] = &process{exited: true, maps: maps}
	r.mu.Unlock()
	r.noteChange(pid)
	return nil
}

// programAt opens the program at its name from our root, if that file is
// the one loaded.
func (r *Resolver) programAt(p Program, fits func(*Module) bool) (*Module, error) {
	if !strings.HasPrefix(p.Path, "/") {
		return nil, ErrNoProgramFile // relative to a working directory we do not know
	}
	fi, err := os.Stat(p.Path)
	if err != nil {
		return nil, ErrNoProgramFile
	}
	key, ok := keyOf(fi)
	if !ok || key.ino != p.Ino || (p.Size != 0 && uint64(key.size) != p.Size) || !sameDevice(key.dev, p.Dev) {
		return nil, ErrNoProgramFile
	}
	mod, err := r.mods.module(p.Path, p.Ino, origin{modPath: p.Path, roots: []string{""}, ourPath: true})
	if err != nil || !fits(mod) {
		return nil, ErrNoProgramFile
	}
	return mod, nil
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
