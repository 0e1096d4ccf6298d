package allocator

import (
	"fmt"

	"github.com/memtrace/memtrace/internal/event"
)

// pyFunc is a CPython allocation function and the Func it is probed as.
type pyFunc struct {
	name string
	fn   event.Func
}

// pythonFuncs are CPython's allocation functions that pymalloc serves:
// the object domain (PyObject_*) and, since 3.6, the memory domain
// (PyMem_*, distinct functions calling the same allocator). Objects of 512
// bytes or less never reach malloc: without these probes Python's small
// objects are invisible, and its 256 KiB arenas look like anonymous mmaps
// made by whichever C function opened them. Larger requests fall through
// to malloc inside the call: the probes see a nested call and count the
// block once (bpf/memtrace.bpf.c's in_outer), as they do realloc's mremap.
// PyMem_Raw* are malloc itself, already probed.
var pythonFuncs = []pyFunc{
	{"PyObject_Malloc", event.FuncPyMalloc},
	{"PyObject_Calloc", event.FuncPyCalloc},
	{"PyObject_Realloc", event.FuncPyRealloc},
	{"PyObject_Free", event.FuncPyFree},
	{"PyMem_Malloc", event.FuncPyMalloc},
	{"PyMem_Calloc", event.FuncPyCalloc},
	{"PyMem_Realloc", event.FuncPyRealloc},
	{"PyMem_Free", event.FuncPyFree},
}

// pymallocFuncs are pymalloc's own functions, which PyObject_* and PyMem_*
// reach through the allocator table (_PyObject.malloc...), taking its
// context first. Where the interpreter keeps their local symbols
// (pyenv's and python.org's builds; not Debian's stripped one) they are
// probed in place of the eight above: every entry of those is a move or
// a RIP-relative load, which the kernel cannot emulate, and a probe it
// must single-step cost 14 µs here against 0.5 µs for one it emulates
// (docs/python.md). A custom allocator (PYTHONMALLOC=malloc) does not
// reach them: its blocks are malloc's, probed there.
var pymallocFuncs = []pyFunc{
	{"_PyObject_Malloc", event.FuncPyMalloc},
	{"_PyObject_Calloc", event.FuncPyCalloc},
	{"_PyObject_Realloc", event.FuncPyRealloc},
	{"_PyObject_Free", event.FuncPyFree},
}

func isPymallocFunc(name string) bool {
	for _, f := range pymallocFuncs {
		if f.name == name {
			return true
		}
	}
	return false
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
		add := func(name string, fn event.Func, ctx bool) {
			sym, ok := s[name]
			if !ok {
				return
			}
			key := fmt.Sprintf("%s@%#x", m.Path, sym.offset)
			if seen[key] {
				return
			}
			seen[key] = true
			probes = append(probes, Probe{Func: fn, Symbol: name, Path: m.Path,
				Module: m.Module, Offset: sym.offset, Size: sym.size, CtxFirst: ctx, PoolSize: sym.pool})
		}
		switch {
		case hasAll(s, pymallocFuncs):
			for _, f := range pymallocFuncs {
				add(f.name, f.fn, true)
			}
		case s[newPoolName].pool != 0:
			// The fast path is inlined into the interpreter's callers:
			// PyObject_Malloc's own code sees a fraction of the blocks,
			// and counting those inside pools would count them twice.
			// Pools alone, then; a large request is malloc's.
			add(newPoolName, event.FuncPyPool, false)
		default:
			for _, f := range pythonFuncs {
				add(f.name, f.fn, false)
			}
		}
		// code_dealloc: the probes read each code object's tag once and
		// forget it when the code object is freed (bpf/python.h).
		add(codeDeallocName, event.FuncPyCodeFree, false)
		return probes
	}
	return nil
}

// hasAll reports whether s defines every one of funcs.
func hasAll(s map[string]symbol, funcs []pyFunc) bool {
	for _, f := range funcs {
		if _, ok := s[f.name]; !ok {
			return false
		}
	}
	return true
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
