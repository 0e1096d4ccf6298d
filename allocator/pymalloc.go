package allocator

import (
	"fmt"

	"github.com/memtrace/memtrace/event"
)

// pythonFuncs are CPython's allocation functions that pymalloc serves:
// the object domain (PyObject_*) and, since 3.6, the memory domain
// (PyMem_*, distinct functions calling the same allocator). Objects of 512
// bytes or less never reach malloc: without these probes Python's small
// objects are invisible, and its 256 KiB arenas look like anonymous mmaps
// made by whichever C function opened them. Larger requests fall through
// to malloc inside the call: the probes see a nested call and count the
// block once (bpf/memtrace.bpf.c's in_outer), as they do realloc's mremap.
// PyMem_Raw* are malloc itself, already probed.
var pythonFuncs = []struct {
	name string
	fn   event.Func
}{
	{"PyObject_Malloc", event.FuncPyMalloc},
	{"PyObject_Calloc", event.FuncPyCalloc},
	{"PyObject_Realloc", event.FuncPyRealloc},
	{"PyObject_Free", event.FuncPyFree},
	{"PyMem_Malloc", event.FuncPyMalloc},
	{"PyMem_Calloc", event.FuncPyCalloc},
	{"PyMem_Realloc", event.FuncPyRealloc},
	{"PyMem_Free", event.FuncPyFree},
}

// bindPython adds the pymalloc probes of the first module in lookup order
// that defines PyObject_Malloc and PyObject_Free (the executable when
// libpython is linked in, as in Debian's python3, else libpython3.x.so).
// Every function comes from that one module: an extension defining a
// function of the same name is not the interpreter's allocator.
func bindPython(modules []Module, syms []map[string]symbol, seen map[string]bool) []Probe {
	for i, m := range modules {
		s := syms[i]
		if _, ok := s["PyObject_Malloc"]; !ok {
			continue
		}
		if _, ok := s["PyObject_Free"]; !ok {
			continue
		}
		var probes []Probe
		for _, f := range pythonFuncs {
			sym, ok := s[f.name]
			if !ok {
				continue
			}
			key := fmt.Sprintf("%s@%#x", m.Path, sym.offset)
			if seen[key] {
				continue
			}
			seen[key] = true
			probes = append(probes, Probe{Func: f.fn, Symbol: f.name, Path: m.Path,
				Module: m.Module, Offset: sym.offset, Size: sym.size})
		}
		return probes
	}
	return nil
}

// IsPython reports whether probes include pymalloc's.
func IsPython(probes []Probe) bool {
	for _, p := range probes {
		if p.Func.Python() {
			return true
		}
	}
	return false
}
