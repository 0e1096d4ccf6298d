package python

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"golang.org/x/arch/x86/x86asm"
)

// ErrNoPoolHelper: the interpreter's PyObject_Malloc does not hold an
// inlined copy of pymalloc's fast path calling a helper for new pools
// (most builds: PyObject_Malloc only jumps through the allocator table).
var ErrNoPoolHelper = errors.New("no inlined pymalloc pool helper")

// minPoolCallers is how many direct calls to the helper the interpreter's
// code must hold: an LTO and PGO build inlines pymalloc's fast path into
// its hot callers, each calling the helper (171 in Debian's python3.11).
const minPoolCallers = 8

// maxDecoded bounds the bytes decoded of a function with no symbol size.
const maxDecoded = 1024

// NewPool finds pymalloc's allocate_from_new_pool in an interpreter f
// whose build inlines pymalloc's fast path into its callers (Debian's
// python3.11, built with LTO and PGO): static and stripped there, but
// marked no-inline in CPython, so each inlined copy calls it when its size
// class has no pool with a free block. It returns the first block of the
// pool it opened (or reused); the pool is that block's address rounded
// down to poolSize.
//
// It is the one direct call from PyObject_Malloc's inlined fast path into
// a function that no dynamic symbol names (its large requests call malloc
// through the PLT), called from at least minPoolCallers places. The pool
// size is the mask of the first AND in PyObject_Free's inlined copy of
// pymalloc_free, which rounds the freed block down to its pool
// (POOL_ADDR): 16 KiB in 3.10 to 3.13's 64-bit builds.
func NewPool(f *elf.File) (vaddr, poolSize uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			vaddr, poolSize, err = 0, 0, fmt.Errorf("malformed ELF: %v", r)
		}
	}()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, 0, ErrNotPython
	}
	named := map[uint64]bool{}
	var malloc, free elf.Symbol
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF || s.Value == 0 {
			continue
		}
		named[s.Value] = true
		switch s.Name {
		case "PyObject_Malloc":
			malloc = s
		case "PyObject_Free":
			free = s
		}
	}
	if malloc.Value == 0 || free.Value == 0 {
		return 0, 0, ErrNotPython
	}
	code, err := funcCode(f, malloc)
	if err != nil {
		return 0, 0, err
	}
	var target uint64
	for pc, inst := range decode(code, malloc.Value) {
		if inst.Op != x86asm.CALL {
			continue
		}
		rel, ok := inst.Args[0].(x86asm.Rel)
		if !ok {
			continue
		}
		to := pc + uint64(inst.Len) + uint64(int64(rel))
		if named[to] || inPLT(f, to) || !inCode(f, to) {
			continue
		}
		if target != 0 && target != to {
			return 0, 0, fmt.Errorf("%w: PyObject_Malloc calls both %#x and %#x", ErrNoPoolHelper, target, to)
		}
		target = to
	}
	if target == 0 {
		return 0, 0, ErrNoPoolHelper
	}
	if n := directCalls(f, target); n < minPoolCallers {
		return 0, 0, fmt.Errorf("%w: %#x is called from %d places, want %d or more", ErrNoPoolHelper, target, n, minPoolCallers)
	}
	code, err = funcCode(f, free)
	if err != nil {
		return 0, 0, err
	}
	for _, inst := range decode(code, free.Value) {
		if inst.Op != x86asm.AND || len(inst.Args) < 2 {
			continue
		}
		imm, ok := inst.Args[1].(x86asm.Imm)
		if !ok {
			continue
		}
		size := uint64(-int64(imm))
		if size >= 4<<10 && size <= 256<<10 && bits.OnesCount64(size) == 1 {
			return target, size, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: no pool mask in PyObject_Free", ErrNoPoolHelper)
}

// funcCode reads s's code (maxDecoded bytes when the symbol has no size).
func funcCode(f *elf.File, s elf.Symbol) ([]byte, error) {
	n := s.Size
	if n == 0 || n > maxDecoded {
		n = maxDecoded
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || s.Value < p.Vaddr || s.Value >= p.Vaddr+p.Filesz {
			continue
		}
		n = min(n, p.Vaddr+p.Filesz-s.Value)
		b := make([]byte, n)
		if _, err := p.ReadAt(b, int64(s.Value-p.Vaddr)); err != nil {
			return nil, fmt.Errorf("read %s: %w", s.Name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s at %#x is not in the file's code", s.Name, s.Value)
}

// decode yields code's instructions, code starting at address pc, in a
// linear sweep. A byte that does not decode is stepped over.
func decode(code []byte, pc uint64) func(yield func(uint64, x86asm.Inst) bool) {
	return func(yield func(uint64, x86asm.Inst) bool) {
		for off := 0; off < len(code); {
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil {
				off++
				continue
			}
			if !yield(pc+uint64(off), inst) {
				return
			}
			off += inst.Len
		}
	}
}

// inPLT reports whether addr is in a PLT section (calls to other modules).
func inPLT(f *elf.File, addr uint64) bool {
	for _, s := range f.Sections {
		switch s.Name {
		case ".plt", ".plt.sec", ".plt.got":
			if addr >= s.Addr && addr < s.Addr+s.Size {
				return true
			}
		}
	}
	return false
}

// inCode reports whether addr is in an executable segment of f.
func inCode(f *elf.File, addr uint64) bool {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return true
		}
	}
	return false
}

// directCalls counts the bytes in f's executable segments that read as a
// direct call (E8 and a 32-bit displacement) to target: each inlined fast
// path calls the helper so. A byte pattern, not a disassembly: a stray
// match among 171 true ones does not matter.
func directCalls(f *elf.File, target uint64) int {
	n := 0
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || p.Filesz > 1<<30 {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			continue
		}
		for i := 0; i+5 <= len(b); i++ {
			if b[i] != 0xe8 {
				continue
			}
			if p.Vaddr+uint64(i)+5+uint64(int64(int32(binary.LittleEndian.Uint32(b[i+1:])))) == target {
				n++
			}
		}
	}
	return n
}
