package allocator

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// JVMLibrary is the base name of HotSpot's shared library.
const JVMLibrary = "libjvm.so"

// jvmFuncs are HotSpot's os::malloc and os::realloc, by the mangled prefix
// of every overload (with or without a NativeCallStack), and which integer
// argument (1-based) is the NMT category, MEMFLAGS. Every allocation the
// JVM makes for itself (AllocateHeap, CHeapObj, arenas' chunks) goes
// through one of them; os::strdup and os::strdup_check_oom too, but the
// compiler inlined os::malloc into them: they call malloc themselves.
var jvmFuncs = []struct {
	prefix string
	arg    int
}{
	{"_ZN2os6mallocEm8MEMFLAGS", 2},              // os::malloc(size_t, MEMFLAGS, …)
	{"_ZN2os7reallocEPvm8MEMFLAGS", 3},           // os::realloc(void*, size_t, MEMFLAGS, …)
	{"_ZN2os6strdupEPKc8MEMFLAGS", 2},            // os::strdup(const char*, MEMFLAGS)
	{"_ZN2os16strdup_check_oomEPKc8MEMFLAGS", 2}, // os::strdup_check_oom(const char*, MEMFLAGS)
}

// jvmNames is the array of the categories' names, indexed by MEMFLAGS
// (NMTUtil::_memory_type_names): NMT prints them.
const jvmNames = "_ZN7NMTUtil18_memory_type_namesE"

// IsJVM reports whether m is HotSpot's libjvm.so.
func IsJVM(m Module) bool { return filepath.Base(m.Path) == JVMLibrary }

// JVMForCommand returns the libjvm.so files the java launcher at exe
// would load (dlopen, after it starts: too late to find the library in its
// mappings before the JVM's first allocations), from the layout of a JDK:
// bin/java next to lib/<vm>/libjvm.so. None when exe is no launcher.
func JVMForCommand(exe string) []Module {
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil
	}
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(real), "..", "lib", "*", JVMLibrary))
	var out []Module
	for _, p := range paths {
		p = filepath.Clean(p)
		out = append(out, Module{Path: p, Module: p})
	}
	return out
}

// JVMProbes returns the category probes of a libjvm.so (os::malloc and
// os::realloc, entry only) and the categories' names, read from the
// library itself. It fails when the library has no symbol table (a
// stripped build names neither function) or no names.
func JVMProbes(m Module) (probes []Probe, names []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			probes, names, err = nil, nil, fmt.Errorf("read %s: malformed ELF: %v", m.Module, r)
		}
	}()
	f, err := elf.Open(m.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", m.Module, err)
	}
	defer f.Close()
	if !symbolize.TablesFit(f, elf.SHT_SYMTAB) {
		return nil, nil, fmt.Errorf("read symbols of %s: .symtab claims more than 1 GiB", m.Module)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, nil, fmt.Errorf("read symbols of %s: %w (os::malloc is a local symbol: a stripped libjvm.so has no categories)", m.Module, err)
	}
	var table *elf.Symbol
	for i, s := range syms {
		if s.Name == jvmNames {
			table = &syms[i]
			continue
		}
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Size == 0 {
			continue
		}
		for _, fn := range jvmFuncs {
			if rest, ok := strings.CutPrefix(s.Name, fn.prefix); ok && (rest == "" || rest == "RK15NativeCallStack") {
				off, ok := fileOffset(f, s.Value)
				if !ok {
					continue
				}
				probes = append(probes, Probe{Symbol: s.Name, Path: m.Path, Module: m.Module,
					Offset: off, Size: s.Size, CategoryArg: fn.arg})
			}
		}
	}
	if len(probes) == 0 {
		return nil, nil, fmt.Errorf("%s: no os::malloc or os::realloc in its symbol table", m.Module)
	}
	slices.SortFunc(probes, func(a, b Probe) int { return cmp.Compare(a.Offset, b.Offset) })
	if table == nil {
		return nil, nil, fmt.Errorf("%s: no NMTUtil::_memory_type_names in its symbol table", m.Module)
	}
	names, err = readStringArray(f, table.Value, table.Size/8)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: category names: %w", m.Module, err)
	}
	return probes, names, nil
}

// maxRelaBytes bounds the relocations read: libjvm.so's are a few MB; a
// header claiming more is hostile.
const maxRelaBytes = 256 << 20

// readStringArray reads n char* at addr in f. In a position-independent
// library the pointers are not in the file: each is the addend of an
// R_X86_64_RELATIVE relocation of its slot (.rela.dyn); otherwise the slot
// holds the address.
func readStringArray(f *elf.File, addr, n uint64) ([]string, error) {
	if n == 0 || n > 1024 {
		return nil, fmt.Errorf("%d entries", n)
	}
	ptrs := make([]uint64, n)
	raw, err := readAt(f, addr, 8*n)
	if err != nil {
		return nil, err
	}
	for i := range ptrs {
		ptrs[i] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	if rela := f.Section(".rela.dyn"); rela != nil && rela.Size <= maxRelaBytes {
		b, err := rela.Data()
		if err != nil {
			return nil, fmt.Errorf("read .rela.dyn: %w", err)
		}
		const relative = 8 // R_X86_64_RELATIVE
		for i := 0; i+24 <= len(b); i += 24 {
			off := binary.LittleEndian.Uint64(b[i:])
			info := binary.LittleEndian.Uint64(b[i+8:])
			if off >= addr && off < addr+8*n && off%8 == addr%8 && uint32(info) == relative {
				ptrs[(off-addr)/8] = binary.LittleEndian.Uint64(b[i+16:])
			}
		}
	}
	names := make([]string, n)
	for i, p := range ptrs {
		s, err := readAt(f, p, 64)
		if err != nil && !errors.Is(err, errShort) {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		end := bytes.IndexByte(s, 0)
		if end < 0 {
			return nil, fmt.Errorf("entry %d: no string at %#x", i, p)
		}
		names[i] = string(s[:end])
	}
	return names, nil
}

var errShort = errors.New("short read")

// readAt reads up to n bytes at virtual address addr from the section that
// holds it (errShort when the section ends first).
func readAt(f *elf.File, addr, n uint64) ([]byte, error) {
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || addr < s.Addr || addr >= s.Addr+s.Size || s.Addr == 0 {
			continue
		}
		m := min(n, s.Addr+s.Size-addr)
		b := make([]byte, m)
		if _, err := s.ReadAt(b, int64(addr-s.Addr)); err != nil {
			return nil, fmt.Errorf("read %#x: %w", addr, err)
		}
		if m < n {
			return b, errShort
		}
		return b, nil
	}
	return nil, fmt.Errorf("no section holds %#x: %w", addr, os.ErrNotExist)
}
