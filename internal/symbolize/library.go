package symbolize

import (
	"cmp"
	"debug/elf"
	"fmt"
	"slices"
	"strconv"
)

// AddLibrary records that pid loaded the ELF file at path with load bias
// bias (dlopen's link_map l_addr), so that its addresses resolve even after
// the library is unloaded and gone from /proc/PID/maps. path is as the
// process names it; it is opened through /proc/PID/root when possible.
func (r *Resolver) AddLibrary(pid int, path string, bias uint64) error {
	if path == "" {
		return fmt.Errorf("add library of process %d: no path", pid)
	}
	var mod *Module
	var err error
	from := origin{modPath: path, roots: processRoots(pid)}
	// The path is the process's (what it passed to dlopen): resolved in
	// its root, and in ours only when that is its root too.
	paths := []string{"/proc/" + strconv.Itoa(pid) + "/root" + path}
	if len(from.roots) == 1 {
		paths = append(paths, path)
	}
	for _, p := range paths {
		if mod, err = r.mods.module(p, 0, from); err == nil {
			break
		}
	}
	if mod == nil {
		return fmt.Errorf("add library %s of process %d: %w", path, pid, err)
	}
	add := codeMappings(mod, bias, path)
	if len(add) == 0 {
		return fmt.Errorf("add library %s of process %d: no executable segment", path, pid)
	}
	r.mu.Lock()
	old := r.procs[pid]
	p := &process{}
	if old != nil {
		p.maps = old.maps
	}
	p.maps = mergeMappings(p.maps, add)
	r.procs[pid] = p
	r.mu.Unlock()
	r.noteChange(pid)
	return nil
}

// codeMappings are the mappings of mod's executable segments loaded with
// load bias bias, as the kernel makes them.
func codeMappings(mod *Module, bias uint64, path string) []codeMapping {
	var add []codeMapping
	for _, p := range mod.f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || p.Memsz == 0 {
			continue
		}
		// The kernel maps whole pages: the mapping starts at the page holding
		// the segment's first byte, at the page-aligned file offset.
		head := p.Vaddr % pageSize
		add = append(add, codeMapping{
			start: bias + p.Vaddr - head, end: bias + p.Vaddr + p.Memsz,
			offset: p.Off - head, path: path, mod: mod,
		})
	}
	return add
}

// mergeMappings returns the mappings of add, plus those of keep that overlap
// none of them: code unmapped since (a dlclose'd library) keeps resolving
// until something else is mapped over its addresses.
func mergeMappings(keep, add []codeMapping) []codeMapping {
	out := slices.Clone(add)
	for _, k := range keep {
		overlaps := false
		for _, a := range add {
			if k.start < a.end && a.start < k.end {
				overlaps = true
				break
			}
		}
		if !overlaps {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b codeMapping) int { return cmp.Compare(a.start, b.start) })
	return out
}
