package tracer

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/gopclntab"
	"github.com/memtrace/memtrace/procfs"
	"github.com/memtrace/memtrace/unwind"
)

// fileKey names a mapped file as the probes do (struct file_key): the
// kernel's dev_t of its superblock (major << 20 | minor) and its inode.
type fileKey struct{ Dev, Ino uint64 }

// The flags of struct unwind_file (enum file_flag).
const (
	filePending  = uint32(memtraceFileFlagFILE_PENDING)
	fileNoCFI    = uint32(memtraceFileFlagFILE_NO_CFI)
	fileUnmarked = uint32(memtraceFileFlagFILE_UNMARKED)
	fileNoNames  = uint32(memtraceFileFlagFILE_NO_NAMES)
	fileAlloc    = uint32(memtraceFileFlagFILE_ALLOCATOR)
	fileLibrary  = uint32(memtraceFileFlagFILE_LIBRARY)
)

// tables loads files' unwind tables into the probes' maps: up front for the
// modules of a traced process, and when the walk asks for a file it has no
// table for (a KIND_UNWIND_MISS record). Rows are appended to one array;
// a file's rows are loaded once and serve every process that maps it.
type tables struct {
	keyOf       *ebpf.Program // mt_file_key: the key the walk sees for a file
	rows, files *ebpf.Map
	cache       tableSource
	wraps       func(name string) bool
	log         *slog.Logger

	mu     sync.Mutex
	next   uint32 // the first free row
	cap    uint32
	loaded map[fileKey]bool
	full   bool

	reqs chan missRequest
	done chan struct{}
}

type missRequest struct {
	pid uint32
	pc  uint64
	key fileKey
}

func newTables(keyOf *ebpf.Program, rows, files *ebpf.Map, capacity uint32, wraps func(string) bool, cacheDir string, log *slog.Logger) *tables {
	if log == nil {
		log = slog.Default()
	}
	if wraps == nil {
		wraps = func(string) bool { return false }
	}
	t := &tables{
		keyOf: keyOf, rows: rows, files: files, cap: capacity, wraps: wraps,
		cache: unwind.NewCache(cacheDir), log: log,
		loaded: map[fileKey]bool{}, reqs: make(chan missRequest, 1024), done: make(chan struct{}),
	}
	go t.serve()
	return t
}

// tableSource gives a file's unwind table (unwind.Cache).
type tableSource interface {
	Table(path string) (*unwind.Table, error)
}

// request queues a table the walk asked for; never blocks the drain. A
// request that does not fit is forgotten in the map too, so the walk asks
// again later.
func (t *tables) request(pid uint32, pc uint64, key fileKey) {
	if t == nil {
		return
	}
	select {
	case t.reqs <- missRequest{pid, pc, key}:
	default:
		_ = t.files.Delete(key)
	}
}

func (t *tables) serve() {
	defer close(t.done)
	for r := range t.reqs {
		path, err := mappedFile(int(r.pid), r.pc)
		if err != nil {
			// The process is gone, or the pc is not in a file: no table.
			t.set(r.key, 0, 0, fileNoCFI|fileUnmarked)
			continue
		}
		if err := t.load(r.key, path); err != nil {
			t.logLoad(path, err)
		}
	}
}

func (t *tables) close() {
	if t == nil {
		return
	}
	close(t.reqs)
	<-t.done
}

// PreloadTables loads the tables of every executable file mapping of pid
// (as /proc/PID/maps names them), so that its first allocations are
// already charged and unwound right.
func (t *Objects) PreloadTables(pid int) error {
	if t.tables == nil {
		return nil
	}
	maps, err := codeMappings(pid)
	if err != nil {
		return err
	}
	type file struct {
		dev   string
		inode uint64
	}
	seen := map[file]bool{}
	for _, m := range maps {
		if seen[file{m.Dev, m.Inode}] {
			continue // one mapping of each file will do
		}
		seen[file{m.Dev, m.Inode}] = true
		// The key maps shows is the file's as the process sees it; on
		// overlayfs the walk sees the layer's file: ask the kernel.
		path := mapFile(pid, m)
		key, err := t.tables.keyOfPath(path)
		if err == nil {
			err = t.tables.load(key, path)
		}
		if err != nil {
			t.tables.logLoad(m.Path, err)
		}
	}
	return nil
}

// PreloadTableFiles loads the tables of files about to be mapped (the
// libraries of a command stopped at its exec), keyed as the walk will see
// them (keyOf).
func (t *Objects) PreloadTableFiles(paths []string) {
	if t.tables == nil {
		return
	}
	for _, p := range paths {
		key, err := t.tables.keyOfPath(p)
		if err == nil {
			err = t.tables.load(key, p)
		}
		if err != nil {
			t.tables.logLoad(p, err)
		}
	}
}

// keyOfPath asks the kernel which key the walk will see for the file at
// path: it maps the file here and runs mt_file_key on the mapping. stat's
// device and inode are not it on overlayfs (the walk sees the layer's
// file) nor on btrfs subvolumes.
func (t *tables) keyOfPath(path string) (fileKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileKey{}, err
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 1, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return fileKey{}, fmt.Errorf("map %s: %w", path, err)
	}
	defer unix.Munmap(m)
	q := memtraceFileKeyQuery{Addr: uint64(uintptr(unsafe.Pointer(&m[0])))}
	in := make([]byte, unsafe.Sizeof(q))
	out := make([]byte, len(in))
	binary.NativeEndian.PutUint64(in, q.Addr)
	if _, err := t.keyOf.Run(&ebpf.RunOptions{Context: in, ContextOut: out}); err != nil {
		return fileKey{}, fmt.Errorf("file key of %s: %w", path, err)
	}
	if err := binary.Read(bytes.NewReader(out), binary.NativeEndian, &q); err != nil || q.Found == 0 {
		return fileKey{}, fmt.Errorf("file key of %s: not found", path)
	}
	return fileKey{q.Key.Dev, q.Key.Ino}, nil
}

// load builds, marks and uploads one file's table, once per key.
func (t *tables) load(key fileKey, path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loaded[key] {
		return nil
	}
	t.loaded[key] = true
	rows, flags, err := t.build(path)
	if err != nil || len(rows) == 0 {
		// No unwind information: the walk follows frame pointers there.
		t.putFile(key, 0, 0, fileNoCFI|flags|fileUnmarked)
		return err
	}
	n := uint32(len(rows) / 8)
	if t.next+n > t.cap {
		if !t.full {
			t.full = true
			t.log.Warn("unwind tables full: stacks through further files follow frame pointers", "rows", t.cap)
		}
		t.putFile(key, 0, 0, fileNoCFI|fileUnmarked)
		return nil
	}
	keys := make([]uint32, n)
	vals := make([]uint64, n)
	for i := range keys {
		keys[i] = t.next + uint32(i)
		vals[i] = binary.NativeEndian.Uint64(rows[i*8:])
	}
	if _, err := t.rows.BatchUpdate(keys, vals, nil); err != nil {
		for i := range keys {
			if err := t.rows.Update(keys[i], vals[i], ebpf.UpdateAny); err != nil {
				t.putFile(key, 0, 0, fileNoCFI|fileUnmarked)
				return fmt.Errorf("load unwind rows of %s: %w", path, err)
			}
		}
	}
	t.putFile(key, t.next, n, flags)
	t.next += n
	return nil
}

func (t *tables) set(key fileKey, first, count, flags uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loaded[key] = true
	t.putFile(key, first, count, flags)
}

func (t *tables) putFile(key fileKey, first, count, flags uint32) {
	v := memtraceUnwindFile{First: first, Count: count, Flags: flags}
	if err := t.files.Update(memtraceFileKey{Dev: key.Dev, Ino: key.Ino}, v, ebpf.UpdateAny); err != nil {
		t.log.Debug("unwind file entry", "err", err)
	}
}

// build returns the encoded rows of path, keyed by file offset (the walk
// knows a pc's offset in its file, not the ELF's addresses), with the
// wrapper and unnamed ranges marked, and the file's flags.
func (t *tables) build(path string) ([]byte, uint32, error) {
	tab, err := t.cache.Table(path)
	if err != nil {
		return nil, 0, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	tab = tab.Clone()
	marked, named, alloc := markFunctions(f, tab, t.wraps)
	rows, err := toFileOffsets(f, tab)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	b, err := rows.Encode()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	var flags uint32
	if !marked {
		flags |= fileUnmarked
	}
	if !named {
		flags |= fileNoNames
	}
	// A program that links an allocator in statically is no allocator
	// library: its own frames must not pass for the allocator's.
	if sharedLibrary(f) {
		flags |= fileLibrary
		if alloc {
			flags |= fileAlloc
		}
	}
	return b, flags, nil
}

// markFunctions flags the code of allocation wrappers, of memory
// functions (allocator.MemoryFunction: page faults there are charged to
// the caller), and code no named function covers, in tab; it reports
// whether it flagged anything. In a C library or an allocator, unnamed
// code is its internals: memory functions too. named: whether any named
// function lies in .text; alloc: whether the file is an allocator library
// (allocator.AllocatorLibrary).
func markFunctions(f *elf.File, tab *unwind.Table, wraps func(string) bool) (marked, named, alloc bool) {
	type fn struct {
		start, end uint64
		name       string
	}
	var fns []fn
	defined := map[string]bool{}
	// A Go executable without .symtab (-ldflags=-s) names its functions
	// in its function table: runtime.memmove and the rest are marked too.
	symtab, _ := f.Symbols()
	dynsym, _ := f.DynamicSymbols()
	var goSyms []elf.Symbol
	if len(symtab) == 0 {
		if gt, err := gopclntab.Read(f); err == nil {
			for _, fn := range gt.Funcs {
				goSyms = append(goSyms, elf.Symbol{Name: fn.Name, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC),
					Value: fn.Entry, Size: fn.End - fn.Entry})
			}
		}
	}
	for _, syms := range [][]elf.Symbol{symtab, dynsym, goSyms} {
		for _, s := range syms {
			t := elf.ST_TYPE(s.Info)
			if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || s.Value == 0 {
				continue
			}
			defined[s.Name] = true
			if t != elf.STT_FUNC || s.Size == 0 {
				continue // an IFUNC's symbol is its resolver, not the code run
			}
			fns = append(fns, fn{s.Value, s.Value + s.Size, s.Name})
			if wraps(s.Name) {
				tab.Mark(s.Value, s.Value+s.Size, unwind.FlagWrapper)
				marked = true
			}
			if allocator.MemoryFunction(s.Name) {
				tab.Mark(s.Value, s.Value+s.Size, unwind.FlagMemFn)
				marked = true
			}
		}
	}
	// Unnamed code: the gaps between named functions in .text.
	defines := func(n string) bool { return defined[n] }
	alloc = allocator.AllocatorLibrary(defines)
	text := f.Section(".text")
	if text == nil {
		return marked, true, alloc
	}
	anon := unwind.FlagAnon
	if allocator.MemoryLibrary(defines) {
		anon |= unwind.FlagMemFn
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].start < fns[j].start })
	at, end := text.Addr, text.Addr+text.Size
	for _, x := range fns {
		if x.end <= at || x.start >= end {
			continue
		}
		named = true
		if x.start > at {
			tab.Mark(at, x.start, anon)
			marked = true
		}
		at = max(at, x.end)
	}
	if at < end {
		tab.Mark(at, end, anon)
		marked = true
	}
	return marked, named, alloc
}

// sharedLibrary reports whether f is a shared library rather than a
// program: a shared object (ET_DYN) with a soname. (An interpreter does
// not tell: PIE programs have one, and so does glibc's libc.so.6, which
// runs as a program too.)
func sharedLibrary(f *elf.File) bool {
	if f.Type != elf.ET_DYN {
		return false
	}
	names, err := f.DynString(elf.DT_SONAME)
	return err == nil && len(names) > 0
}

// toFileOffsets re-keys the rows of executable segments by file offset;
// rows elsewhere are dropped.
func toFileOffsets(f *elf.File, tab *unwind.Table) (*unwind.Table, error) {
	var segs []*elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			segs = append(segs, p)
		}
	}
	out := &unwind.Table{}
	for _, r := range tab.Rows {
		for _, p := range segs {
			if r.PC >= p.Vaddr && r.PC < p.Vaddr+p.Memsz {
				r.PC = r.PC - p.Vaddr + p.Off
				out.Rows = append(out.Rows, r)
				break
			}
		}
	}
	if !sort.SliceIsSorted(out.Rows, func(i, j int) bool { return out.Rows[i].PC < out.Rows[j].PC }) {
		return nil, errors.New("executable segments out of order")
	}
	return out, nil
}

// codeMappings returns pid's executable file mappings.
func codeMappings(pid int) ([]procfs.Mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("read mappings of %d: %w", pid, err)
	}
	defer f.Close()
	all, err := procfs.ParseMaps(f)
	if err != nil {
		return nil, fmt.Errorf("read mappings of %d: %w", pid, err)
	}
	var out []procfs.Mapping
	for _, m := range all {
		if m.Executable() && m.FileBacked() {
			out = append(out, m)
		}
	}
	return out, nil
}

// mapFile is a path that opens the file of a mapping of pid's, wherever it
// lives (another mount namespace, deleted).
func mapFile(pid int, m procfs.Mapping) string {
	return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)
}

// mappedFile returns a path that opens the file mapped at pc in pid.
func mappedFile(pid int, pc uint64) (string, error) {
	maps, err := codeMappings(pid)
	if err != nil {
		return "", err
	}
	for _, m := range maps {
		if pc >= m.Start && pc < m.End {
			return mapFile(pid, m), nil
		}
	}
	return "", fmt.Errorf("no file mapped at %#x in process %d", pc, pid)
}

// logLoad logs a table that could not be loaded. A process that exited
// before its files were read is routine (whole-host mode sees thousands):
// only -v -v shows it; the walk asks again if the file is met later.
func (t *tables) logLoad(file string, err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		t.log.Debug("unwind table", "file", file, "err", err)
		return
	}
	t.log.Info("unwind table", "file", file, "err", err)
}
