package tracer

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/diskcache"
	"github.com/memtrace/memtrace/internal/gopclntab"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/unwind"
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

// tables loads files' unwind tables into the probes' maps: those of a
// traced process's modules as soon as it is attached, and those the walk
// asks for when it meets a file it has no table for (a KIND_UNWIND_MISS
// record). Tables are built in the background: nothing waits for them
// (until one is in, the walk charges the frame it is at and follows frame
// pointers: docs/unwinding.md). Rows are appended to one array; a file's
// rows are loaded once and serve every process that maps it.
type tables struct {
	keyOf       *ebpf.Program // mt_file_key: the key the walk sees for a file
	rows, files *ebpf.Map
	cache       tableSource
	store       *diskcache.Store // marked tables by file and rule; nil: none
	wraps       func(name string) bool
	rule        string // names wraps and this memtrace (rowsKey)
	log         *slog.Logger

	mu     sync.Mutex
	next   uint32 // the first free row
	cap    uint32
	loaded map[fileKey]bool          // built or being built
	ready  map[fileKey]chan struct{} // closed once a load's table is in the maps (or failed)
	keys   map[mapsFile]fileKey
	full   bool
	closed bool // the maps are closing: nothing more is uploaded

	reqs chan missRequest
	done chan struct{}
	bg   sync.WaitGroup // preloads under way
}

// mapsFile is a file as /proc/PID/maps names it (its device as the
// process sees it, and its inode).
type mapsFile struct {
	dev   string
	inode uint64
}

type missRequest struct {
	pid uint32
	pc  uint64
	key fileKey
}

func newTables(keyOf *ebpf.Program, rows, files *ebpf.Map, capacity uint32, wraps func(string) bool, wrapsKey string, store *diskcache.Store, log *slog.Logger) *tables {
	if log == nil {
		log = slog.Default()
	}
	if wraps == nil {
		wraps = func(string) bool { return false }
	}
	t := &tables{
		keyOf: keyOf, rows: rows, files: files, cap: capacity, wraps: wraps,
		cache: unwind.NewCache(store), store: store, rule: wrapsKey + "-" + selfKey(), log: log, loaded: map[fileKey]bool{}, ready: map[fileKey]chan struct{}{}, keys: map[mapsFile]fileKey{},
		reqs: make(chan missRequest, 1024), done: make(chan struct{}),
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
			// The process is gone (a short-lived one, met first): the
			// next process to meet the file asks again. Its table may
			// be in, or being built by a preload: that one stands.
			t.forget(r.key)
			continue
		}
		if err := t.load(r.key, path); err != nil {
			t.logLoad(path, err)
		}
	}
}

// closeWait bounds how long close waits for tables being built: long
// enough for a big program's first build to reach the disk cache, so that
// the next run finds it.
const closeWait = 5 * time.Second

func (t *tables) close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	close(t.reqs)
	<-t.done
	waited := make(chan struct{})
	go func() { t.bg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(closeWait):
		t.log.Debug("unwind tables: stopped waiting for builds", "after", closeWait)
	}
}

// background runs f aside; close waits for it (up to closeWait).
func (t *tables) background(f func()) {
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		f()
	}()
}

// WaitTables waits until the tables preloaded so far are in the maps
// (tests; a run never waits for them).
func (t *Objects) WaitTables() {
	if t.tables != nil {
		t.tables.bg.Wait()
	}
}

// SmallTableFile bounds the files whose tables PreloadTables counts as
// small: a program, libc or libstdc++ (a few MB) has its table in well
// under a second even from scratch on a loaded machine; node (98 MB) or
// libLLVM (110 MB) take seconds.
const SmallTableFile = 32 << 20

// Preload's channels: Small is closed once the tables of every small file
// (SmallTableFile) are in the maps, All once every table is. A target's
// probes wait for Small, so that a small program is charged right from
// its first allocation, and at most a bound for All (docs/unwinding.md).
type Preload struct {
	Small, All <-chan struct{}
}

// AllIn reports whether every table is in; a zero Preload's are.
func (p Preload) AllIn() bool { return closed(p.All) }

// closed reports whether ch is closed; a nil channel counts as closed.
func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// PreloadTables loads, in the background, the tables of every executable
// file mapping of pid (as /proc/PID/maps names them), then those of the
// files at paths (the libraries a command stopped at its exec will map),
// so that its allocations are charged and unwound right as soon as they
// are in. Small files go first: a big program's table does not hold up
// libc's. Files already loaded cost a map lookup: a whole host starts
// many processes of a few programs.
func (t *Objects) PreloadTables(pid int, paths []string) (Preload, error) {
	small, all := make(chan struct{}), make(chan struct{})
	done := Preload{Small: small, All: all}
	finish := func() { close(small); close(all) }
	if t.tables == nil {
		finish()
		return done, nil
	}
	maps, err := codeMappings(pid)
	if err != nil {
		finish()
		return done, err
	}
	type todo struct {
		file mapsFile // zero for paths
		path string
		size int64
	}
	var files []todo
	seen := map[mapsFile]bool{}
	t.tables.mu.Lock()
	for _, m := range maps {
		mf := mapsFile{m.Dev, m.Inode}
		if seen[mf] {
			continue // one mapping of each file will do
		}
		seen[mf] = true
		if key, ok := t.tables.keys[mf]; ok && t.tables.loaded[key] && t.tables.isReady(key) {
			continue
		}
		// The key maps shows is the file's as the process sees it; on
		// overlayfs the walk sees the layer's file: ask the kernel.
		files = append(files, todo{file: mf, path: mapFile(pid, m)})
	}
	t.tables.mu.Unlock()
	for _, p := range paths {
		files = append(files, todo{path: p})
	}
	if len(files) == 0 {
		finish()
		return done, nil
	}
	for i := range files {
		files[i].size = SmallTableFile + 1 // unknown: counted as big
		if st, err := os.Stat(files[i].path); err == nil {
			files[i].size = st.Size()
		}
	}
	slices.SortStableFunc(files, func(a, b todo) int { return cmp.Compare(a.size, b.size) })
	t.tables.background(func() {
		defer close(all)
		smallOpen := true
		start := time.Now()
		for _, f := range files {
			if smallOpen && f.size > SmallTableFile {
				close(small)
				smallOpen = false
			}
			key, err := t.tables.keyOfPath(f.path)
			if err == nil {
				if f.file != (mapsFile{}) {
					t.tables.mu.Lock()
					t.tables.keys[f.file] = key
					t.tables.mu.Unlock()
				}
				err = t.tables.load(key, f.path)
				// Another load of the same file (a miss, another
				// process's preload) may still be building it.
				t.tables.wait(key)
			}
			if err != nil {
				t.tables.logLoad(f.path, err)
			}
		}
		if smallOpen {
			close(small)
		}
		t.tables.log.Info("unwind tables loaded", "pid", pid, "files", len(files), "took", time.Since(start))
	})
	return done, nil
}

// isReady says whether key's load has finished; t.mu is held.
func (t *tables) isReady(key fileKey) bool {
	return closed(t.ready[key]) // no entry: nothing under way
}

// wait waits until key's load, if one was started, has finished, or the
// tables are closing.
func (t *tables) wait(key fileKey) {
	t.mu.Lock()
	ch := t.ready[key]
	t.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-t.done:
	}
}

// PreloadTableFiles loads, in the background, the tables of files about
// to be mapped or just mapped (a dlopen'ed library), keyed as the walk
// will see them (keyOf). Each goes in as soon as it is built: a file is
// not held up by another's preload.
func (t *Objects) PreloadTableFiles(paths []string) {
	if t.tables == nil || len(paths) == 0 {
		return
	}
	paths = slices.Clone(paths)
	t.tables.background(func() {
		for _, p := range paths {
			key, err := t.tables.keyOfPath(p)
			if err == nil {
				err = t.tables.load(key, p)
				// Another load of the same file may still be building it.
				t.tables.wait(key)
			}
			if err != nil {
				t.tables.logLoad(p, err)
				continue
			}
			// -v: what a script (or a test) can wait for before a
			// library's code runs: from here its frames unwind.
			t.tables.log.Info("unwind table loaded", "file", p)
		}
	})
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
	// The mapping is there, so a miss is bpf_find_vma finding the
	// address space's lock taken (it only tries): memtrace's own threads
	// map and unmap meanwhile (unmapping a big file's pages holds it for
	// a while). With both cores busy, 1 run of `-- node -e 0` in 10 had
	// files miss, all ten in one, and their frames went without tables.
	for try := range keyTries {
		if _, err := t.keyOf.Run(&ebpf.RunOptions{Context: in, ContextOut: out}); err != nil {
			return fileKey{}, fmt.Errorf("file key of %s: %w", path, err)
		}
		if err := binary.Read(bytes.NewReader(out), binary.NativeEndian, &q); err == nil && q.Found != 0 {
			return fileKey{q.Key.Dev, q.Key.Ino}, nil
		}
		time.Sleep(time.Duration(try+1) * 10 * time.Microsecond)
	}
	return fileKey{}, fmt.Errorf("file key of %s: %w", path, errKeyBusy)
}

// keyTries bounds keyOfPath's tries: their waits add up to about 0.2 s.
const keyTries = 200

// errKeyBusy: the kernel found memtrace's address space locked at every try.
var errKeyBusy = errors.New("address space locked at every try")

// load builds, marks and uploads one file's table, once per key. The
// build runs unlocked: tables of other files go in meanwhile.
func (t *tables) load(key fileKey, path string) error {
	t.mu.Lock()
	if t.loaded[key] || t.closed {
		t.mu.Unlock()
		return nil
	}
	t.loaded[key] = true
	ready := make(chan struct{})
	t.ready[key] = ready
	t.mu.Unlock()
	defer close(ready) // after the maps have it: deferred before the unlock
	rows, flags, err := t.build(path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
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
	if err := t.putRows(t.next, rows); err != nil {
		t.putFile(key, 0, 0, fileNoCFI|fileUnmarked)
		return fmt.Errorf("load unwind rows of %s: %w", path, err)
	}
	t.putFile(key, t.next, n, flags)
	t.next += n
	return nil
}

// putRows writes encoded rows (8 bytes each) into the rows map from row
// first on. The map is mmapable (loadSpec): the rows are copied into its
// pages, mapped for the copy. Element by element (BatchUpdate), node's
// 376k rows took ~40 ms, on the path of its probes (they wait for its
// table: TablesWait); the copy takes a few. A map that cannot be mapped
// (a test object's) is written element by element.
func (t *tables) putRows(first uint32, rows []byte) error {
	if t.rows.Flags()&unix.BPF_F_MMAPABLE != 0 {
		err := copyRows(t.rows, first, rows)
		if err == nil {
			return nil
		}
		t.log.Debug("unwind rows: not mapped", "err", err)
	}
	n := len(rows) / 8
	keys := make([]uint32, n)
	vals := make([]uint64, n)
	for i := range keys {
		keys[i] = first + uint32(i)
		vals[i] = binary.NativeEndian.Uint64(rows[i*8:])
	}
	if _, err := t.rows.BatchUpdate(keys, vals, nil); err != nil {
		for i := range keys {
			if err := t.rows.Update(keys[i], vals[i], ebpf.UpdateAny); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyRows copies rows into an mmapable array of 8-byte values from
// index first on, through a shared mapping of the pages they fall in,
// unmapped at once: the pages are the map's, and stay out of memtrace's
// resident set.
func copyRows(m *ebpf.Map, first uint32, rows []byte) error {
	if len(rows) == 0 {
		return nil
	}
	start := int64(first) * 8
	off := start &^ int64(os.Getpagesize()-1)
	b, err := unix.Mmap(m.FD(), off, int(start-off)+len(rows), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map unwind rows: %w", err)
	}
	copy(b[start-off:], rows)
	return unix.Munmap(b)
}

// forget removes a pending entry no load is under way for.
func (t *tables) forget(key fileKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded[key] && !t.closed {
		_ = t.files.Delete(key)
	}
}

func (t *tables) putFile(key fileKey, first, count, flags uint32) {
	v := memtraceUnwindFile{First: first, Count: count, Flags: flags}
	if err := t.files.Update(memtraceFileKey{Dev: key.Dev, Ino: key.Ino}, v, ebpf.UpdateAny); err != nil {
		t.log.Debug("unwind file entry", "err", err)
	}
}

// build returns the encoded rows of path, keyed by file offset (the walk
// knows a pc's offset in its file, not the ELF's addresses), with the
// wrapper and unnamed ranges marked, and the file's flags. They come from
// the store when it has them: marking a big program's ~100k functions
// costs more than reading its rows.
func (t *tables) build(path string) ([]byte, uint32, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	f, err := elf.NewFile(file)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	key := ""
	if t.store != nil {
		key = rowsKey(f, st, t.rule)
		if b, err := t.store.Get(key); err == nil && len(b) >= 4 && (len(b)-4)%unwind.RowSize == 0 {
			return b[4:], binary.LittleEndian.Uint32(b), nil
		}
	}
	// The CFI and the symbols, read side by side: each takes a big
	// program about as long as the other.
	var tab *unwind.Table
	built := make(chan struct{})
	go func() {
		defer close(built)
		tab, err = t.cache.Table(path)
	}()
	marks, fpCode, named, alloc := functionMarks(f, uint64(st.Size()), t.wraps)
	<-built
	if err != nil {
		return nil, 0, err
	}
	// MarkAll and FramePointer replace the rows rather than change them:
	// the cached table's rows stay as they are, uncopied.
	tab = &unwind.Table{Rows: tab.Rows}
	tab.MarkAll(marks)
	tab.FramePointer(fpCode)
	marked := len(marks) > 0
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
	if key != "" {
		if err := t.store.Put(key, append(binary.LittleEndian.AppendUint32(nil, flags), b...)); err != nil {
			t.log.Debug("unwind cache: not stored", "file", path, "err", err)
		}
	}
	return b, flags, nil
}

// rowsVersion names the format of the marked rows in the store; the
// rule's key names the wrapper rule and this memtrace binary, whose lists
// of memory functions and allocators decide the marks too.
const rowsVersion = "rows1-"

// rowsKey names a file's marked rows: its unwind information, its size
// (a stripped copy shares the build-id but not the symbols that mark it)
// and the rule.
func rowsKey(f *elf.File, st os.FileInfo, rule string) string {
	return fmt.Sprintf("%s%s-%x-%s", rowsVersion, unwind.FileKey(f, st), st.Size(), rule)
}

// selfKey names the running memtrace binary (its device, inode, size and
// modification time): a rebuilt memtrace marks afresh.
var selfKey = sync.OnceValue(func() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return "0"
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%d %d %d %d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec))
	return hex.EncodeToString(h[:6])
})

// framePointerCode names functions that have no CFI but keep frame
// pointers: V8's embedded builtins (Builtins_*, linked into node's
// .text), through which node's allocations reach its JIT code.
func framePointerCode(name string) bool {
	return strings.HasPrefix(name, "Builtins_")
}

// disjoint sorts ranges and drops those overlapping an earlier one (a
// function named in both .symtab and .dynsym, an alias).
func disjoint(ranges [][2]uint64) [][2]uint64 {
	sort.Slice(ranges, func(i, j int) bool { return ranges[i][0] < ranges[j][0] })
	out := ranges[:0]
	for _, r := range ranges {
		if n := len(out); n > 0 && r[0] < out[n-1][1] {
			continue
		}
		out = append(out, r)
	}
	return out
}

// markFunctions flags the code of allocation wrappers, of memory
// functions (allocator.MemoryFunction: page faults there are charged to
// the caller), and code no named function covers, in tab; it reports
// whether it flagged anything. In a C library or an allocator, unnamed
// code is its internals: memory functions too. named: whether any named
// function lies in .text; alloc: whether the file is an allocator library
// (allocator.AllocatorLibrary).
func markFunctions(f *elf.File, tab *unwind.Table, wraps func(string) bool) (marked, named, alloc bool) {
	marks, fpCode, named, alloc := functionMarks(f, 0, wraps) // size unknown: nothing presized
	tab.MarkAll(marks)
	tab.FramePointer(fpCode)
	return len(marks) > 0, named, alloc
}

// functionMarks is markFunctions' reading of f's symbols: the ranges to
// mark, apart from any table (build reads them while the CFI is built).
// fileSize, the file's size, bounds what the headers may presize.
func functionMarks(f *elf.File, fileSize uint64, wraps func(string) bool) (marks []unwind.Span, fpCode [][2]uint64, named, alloc bool) {
	type fn struct{ start, end uint64 }
	// What a name is, judged once: .dynsym repeats most of .symtab, and
	// judging a C++ name parses it (node has 180k function symbols).
	const (
		judged = 1 << iota
		isWrapper
		isMemFn
		isFPCode
	)
	// Sized from the headers of tables that lie within the file, up to a
	// bound: a crafted header may claim any size.
	entries := 0
	for _, s := range f.Sections {
		if (s.Type == elf.SHT_SYMTAB || s.Type == elf.SHT_DYNSYM) && s.Offset <= fileSize && s.Size <= fileSize-s.Offset {
			entries += int(s.Size / elf.Sym64Size)
		}
	}
	entries = min(entries, 1<<20)
	names := make(map[string]uint8, entries)
	fns := make([]fn, 0, entries)
	add := func(name []byte, info byte, value, size uint64) {
		t := elf.ST_TYPE(info)
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || value == 0 {
			return
		}
		what, seen := names[string(name)] // a lookup makes no copy
		key := ""
		if !seen {
			key = string(name)
			names[key] = 0 // defined
		}
		if t != elf.STT_FUNC || size == 0 {
			return // an IFUNC's symbol is its resolver, not the code run
		}
		if what&judged == 0 {
			if seen {
				key = string(name)
			}
			what = judged
			if wraps(key) {
				what |= isWrapper
			}
			if allocator.MemoryFunction(key) {
				what |= isMemFn
			}
			if framePointerCode(key) {
				what |= isFPCode
			}
			names[key] = what
		}
		fns = append(fns, fn{value, value + size})
		if what&isFPCode != 0 {
			fpCode = append(fpCode, [2]uint64{value, value + size})
		}
		if what&isWrapper != 0 {
			marks = append(marks, unwind.Span{Start: value, End: value + size, Flag: unwind.FlagWrapper})
		}
		if what&isMemFn != 0 {
			marks = append(marks, unwind.Span{Start: value, End: value + size, Flag: unwind.FlagMemFn})
		}
	}
	// Entries are read in place (symbolize.EachSymbol): debug/elf makes a
	// string of each of node's 400k names, which took longer than the CFI.
	// As symbolize reads them: a table over its bound is left out, and a
	// 64-bit .dynsym is read even where its version sections are damaged
	// (debug/elf then gives none of it).
	each := func(typ elf.SectionType) int {
		n := 0
		if !symbolize.TablesFit(f, typ) {
			return 0
		}
		_ = symbolize.EachSymbol(f, typ, func(s symbolize.RawSymbol) {
			n++
			add(s.Name, s.Info, s.Value, s.Size)
		})
		return n
	}
	inSymtab := each(elf.SHT_SYMTAB)
	each(elf.SHT_DYNSYM)
	// A Go executable without .symtab (-ldflags=-s) names its functions
	// in its function table: runtime.memmove and the rest are marked too.
	if inSymtab == 0 {
		if gt, err := gopclntab.Read(f); err == nil {
			for _, g := range gt.Funcs {
				add([]byte(g.Name), elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), g.Entry, g.End-g.Entry)
			}
		}
	}
	fpCode = disjoint(fpCode)
	// Unnamed code: the gaps between named functions in .text.
	defines := func(n string) bool { _, ok := names[n]; return ok }
	alloc = allocator.AllocatorLibrary(defines)
	text := f.Section(".text")
	if text == nil {
		return marks, fpCode, true, alloc
	}
	anon := unwind.FlagAnon
	if allocator.MemoryLibrary(defines) {
		anon |= unwind.FlagMemFn
	}
	slices.SortFunc(fns, func(a, b fn) int { return cmp.Compare(a.start, b.start) })
	at, end := text.Addr, text.Addr+text.Size
	for _, x := range fns {
		if x.end <= at || x.start >= end {
			continue
		}
		named = true
		if x.start > at {
			marks = append(marks, unwind.Span{Start: at, End: x.start, Flag: anon})
		}
		at = max(at, x.end)
	}
	if at < end {
		marks = append(marks, unwind.Span{Start: at, End: end, Flag: anon})
	}
	return marks, fpCode, named, alloc
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
	out := &unwind.Table{Rows: make([]unwind.Row, 0, len(tab.Rows))}
	for _, r := range tab.Rows {
		for _, p := range segs {
			if r.PC >= p.Vaddr && r.PC < p.Vaddr+p.Memsz {
				r.PC = r.PC - p.Vaddr + p.Off
				out.Rows = append(out.Rows, r)
				break
			}
		}
	}
	if !slices.IsSortedFunc(out.Rows, func(a, b unwind.Row) int { return cmp.Compare(a.PC, b.PC) }) {
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
