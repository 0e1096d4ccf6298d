// Package allocator finds, for a process, the module that each allocator
// function actually binds to, the way the dynamic linker would: the
// executable itself when it defines the function (static binaries, programs
// with their own allocator), then LD_PRELOAD'ed libraries, then shared
// libraries in load order. Probing libc in a process that uses jemalloc would
// see nothing, so this is decided per function and per process.
package allocator

import (
	"errors"
	"fmt"

	"github.com/memtrace/memtrace/internal/event"
)

// ErrNotFound means no module of the process defines malloc and free.
var ErrNotFound = errors.New("no allocator found")

// Probe is one function to probe: the code at Offset in the file at Path.
type Probe struct {
	Func event.Func
	// Symbol is the name it was found under.
	Symbol string
	// Path opens the module from memtrace's mount namespace.
	Path string
	// Module is the path as the process sees it, for messages.
	Module string
	// Offset is the file offset of the function's first instruction.
	Offset uint64
	// Size is the symbol's size in bytes (0 when unknown).
	Size uint64
	// CategoryArg, when not 0, makes this a JVM category probe (jvm.go):
	// entry only, reading HotSpot's MEMFLAGS from this argument (1-based).
	CategoryArg int
	// CtxFirst: the function takes a context before its Func's arguments
	// (pymalloc's own _PyObject_Malloc...).
	CtxFirst bool
	// PoolSize is pymalloc's pool size, for event.FuncPyPool.
	PoolSize uint64
}

// Functions lists what is probed, in order of preference when two names are
// aliases of one function (glibc's aligned_alloc is memalign).
var Functions = []event.Func{
	event.FuncMalloc, event.FuncCalloc, event.FuncRealloc, event.FuncReallocarray,
	event.FuncPosixMemalign, event.FuncAlignedAlloc, event.FuncMemalign,
	event.FuncValloc, event.FuncPvalloc, event.FuncFree,
	event.FuncMmap, event.FuncMunmap, event.FuncMremap, event.FuncDlopen,
}

// Module is a candidate file in symbol-lookup order.
type Module struct {
	Path   string // openable from here
	Module string // as the process names it
	// Exe marks the main executable, whose .symtab also counts (a static
	// binary has no .dynsym); a shared library interposes only through .dynsym.
	Exe bool
}

// Bind picks, for every function in Functions, the first module in order
// that defines it, and drops aliases (same file and offset) after the first.
// It fails with ErrNotFound unless malloc and free were both found.
func Bind(modules []Module) ([]Probe, error) {
	var probes []Probe
	seen := map[string]bool{}
	found := map[event.Func]bool{}
	syms := make([]map[string]symbol, len(modules))
	var errs []error
	for i, m := range modules {
		s, err := cachedFunctions(m.Path, m.Exe, allocatorNames, allocatorKey)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		syms[i] = s
	}
	for _, fn := range Functions {
		for i, m := range modules {
			sym, ok := syms[i][fn.String()]
			if !ok {
				continue
			}
			found[fn] = true
			key := fmt.Sprintf("%s@%#x", m.Path, sym.offset)
			if !seen[key] {
				seen[key] = true
				probes = append(probes, Probe{Func: fn, Symbol: fn.String(), Path: m.Path,
					Module: m.Module, Offset: sym.offset, Size: sym.size})
			}
			break
		}
	}
	if !found[event.FuncMalloc] || !found[event.FuncFree] {
		names := make([]string, 0, len(modules))
		for _, m := range modules {
			names = append(names, m.Module)
		}
		err := fmt.Errorf("%w: malloc and free are defined in none of %q (a static binary must keep its symbols; --allocator PATH names the allocator)", ErrNotFound, names)
		if len(errs) > 0 {
			err = fmt.Errorf("%w (%w)", err, errors.Join(errs...))
		}
		return nil, err
	}
	return append(probes, bindPython(modules, syms, seen)...), nil
}

// MallocModule is the module malloc binds to among probes ("": none).
func MallocModule(probes []Probe) string {
	for _, p := range probes {
		if p.Func == event.FuncMalloc {
			return p.Module
		}
	}
	return ""
}
