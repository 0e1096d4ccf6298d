package allocator

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/memtrace/memtrace/internal/python"
	"github.com/memtrace/memtrace/internal/symbolize"
)

type symbol struct {
	offset uint64 // file offset
	size   uint64
	pool   uint64 // newPoolName's: pymalloc's pool size
}

// allocatorNames is the set of names Bind looks for.
var allocatorNames = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range Functions {
		m[f.String()] = true
	}
	for _, f := range pythonFuncs {
		m[f.name] = true
	}
	for _, f := range pymallocFuncs {
		m[f.name] = true
	}
	return m
}()

var allocatorKey = nameKey(allocatorNames)

// definedFunctions returns the allocator functions path defines, with their
// file offsets. debug/elf can panic on hostile input; a panic becomes an error.
func definedFunctions(path string, exe bool, wanted map[string]bool) (out map[string]symbol, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("read symbols of %s: malformed ELF: %v", path, r)
		}
	}()
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read symbols of %s: %w", path, err)
	}
	defer f.Close()

	if !symbolize.TablesFit(f, elf.SHT_DYNSYM) || !symbolize.TablesFit(f, elf.SHT_SYMTAB) {
		return nil, fmt.Errorf("read symbols of %s: a symbol table claims more than 1 GiB", path)
	}
	// The tables' entries as they are, not f.Symbols' strings: an
	// executable's .symtab is big (node's 180 000 symbols took 90 ms to
	// read so, before its probes could go on), and a few names are wanted.
	out = map[string]symbol{}
	add := func(s symbolize.RawSymbol) {
		if s.Section == elf.SHN_UNDEF || s.Value == 0 || !wanted[string(s.Name)] {
			return
		}
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			return
		}
		if bind := elf.ST_BIND(s.Info); bind != elf.STB_GLOBAL && bind != elf.STB_WEAK {
			return
		}
		if _, dup := out[string(s.Name)]; dup {
			return
		}
		off, ok := fileOffset(f, s.Value)
		if !ok {
			return
		}
		out[string(s.Name)] = symbol{offset: off, size: s.Size}
	}
	if err := symbolize.EachSymbol(f, elf.SHT_DYNSYM, add); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("read .dynsym of %s: %w", path, err)
	}
	if exe {
		if err := symbolize.EachSymbol(f, elf.SHT_SYMTAB, add); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("read .symtab of %s: %w", path, err)
		}
	}
	if _, ok := out["PyObject_Malloc"]; ok && wanted[pymallocFuncs[0].name] {
		pymallocLocals(f, exe, out)
		codeDealloc(f, out)
		if !hasAll(out, pymallocFuncs) {
			newPool(f, out)
		}
	}
	return out, nil
}

// pymallocLocals adds to out pymalloc's own functions (static in
// obmalloc.c: local symbols of .symtab, where the file keeps one) of the
// interpreter f. A name defined twice is ambiguous and left out.
func pymallocLocals(f *elf.File, exe bool, out map[string]symbol) {
	st, err := f.Symbols()
	if err != nil {
		return
	}
	seen := map[string]int{}
	for _, s := range st {
		if !isPymallocFunc(s.Name) || s.Section == elf.SHN_UNDEF || s.Value == 0 ||
			elf.ST_TYPE(s.Info) != elf.STT_FUNC || elf.ST_BIND(s.Info) != elf.STB_LOCAL {
			continue
		}
		seen[s.Name]++
		off, ok := fileOffset(f, s.Value)
		if !ok || seen[s.Name] > 1 {
			delete(out, s.Name)
			continue
		}
		out[s.Name] = symbol{offset: off, size: s.Size}
	}
}

// fileOffset maps a virtual address to its offset in the file through the
// executable PT_LOAD segment that holds it.
func fileOffset(f *elf.File, vaddr uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		if vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// codeDeallocName is the name out gives the interpreter's code_dealloc,
// which no symbol names (it is static, and Debian's python3 is stripped).
const codeDeallocName = "code_dealloc"

// codeDealloc adds to out the interpreter f's code_dealloc, found through
// PyCode_Type (python.CodeDealloc); left out when it cannot be found.
func codeDealloc(f *elf.File, out map[string]symbol) {
	v, err := python.CodeDealloc(f)
	if err != nil {
		return
	}
	if off, ok := fileOffset(f, v); ok {
		out[codeDeallocName] = symbol{offset: off}
	}
}

// newPoolName is the name out gives pymalloc's allocate_from_new_pool,
// found in an interpreter that inlines pymalloc's fast path
// (python.NewPool).
const newPoolName = "allocate_from_new_pool"

// newPool adds to out the interpreter f's allocate_from_new_pool, with its
// pool size; left out where the build does not inline pymalloc.
func newPool(f *elf.File, out map[string]symbol) {
	v, pool, err := python.NewPool(f)
	if err != nil {
		return
	}
	if off, ok := fileOffset(f, v); ok {
		out[newPoolName] = symbol{offset: off, pool: pool}
	}
}
