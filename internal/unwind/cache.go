package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/memtrace/memtrace/internal/diskcache"
	"github.com/memtrace/memtrace/internal/procfile"
)

// Cache memoizes tables per file, in memory and, when it has a store, on
// disk, so that a second attach or a second run does not rebuild them.
// Files are keyed by FileKey: their GNU build-id when they have one, else
// their identity. Mark flags are not part of the CFI and are never
// cached: callers Clone a table before marking it.
type Cache struct {
	store     *diskcache.Store // nil: memory only
	debugRoot string           // where separate debug files live, by build-id

	mu      sync.Mutex
	entries map[string]*cacheEntry // by file identity and by content key
	builds  atomic.Int64           // tables built, not found: for tests
}

// cacheEntry is one table, built once; ready closes when tab/err are set.
type cacheEntry struct {
	ready chan struct{}
	tab   *Table
	err   error
}

// NewCache returns a cache that stores tables in store, or only in memory
// when store is nil.
func NewCache(store *diskcache.Store) *Cache {
	return &Cache{store: store, debugRoot: "/usr/lib/debug", entries: map[string]*cacheEntry{}}
}

// Table returns the table of the ELF file at path. The table is shared by
// all callers: do not modify it (Clone it first). Safe for concurrent use;
// concurrent calls for one file build its table once.
func (c *Cache) Table(path string) (*Table, error) {
	// Fast path: a stat names the file's current contents.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("unwind table for %s: %w", path, err)
	}
	if e, ok := c.lookup(fileIdentity(st)); ok {
		return e.wait()
	}
	// Key and contents from one open file, in case path is being replaced;
	// opened without blocking, and only if regular: the path may come from
	// a traced process (a dlopen'ed library), which can put a FIFO there.
	file, err := procfile.OpenFollowed(path, 0)
	if err != nil {
		return nil, fmt.Errorf("unwind table for %s: %w", path, err)
	}
	defer file.Close()
	if st, err = file.Stat(); err != nil {
		return nil, fmt.Errorf("unwind table for %s: %w", path, err)
	}
	idKey := fileIdentity(st)
	e, owner := c.claim(idKey)
	if !owner {
		return e.wait()
	}
	e.tab, e.err = c.load(file, path, idKey)
	c.settle(idKey, e)
	return e.tab, e.err
}

// settle publishes a filled entry. Errors about the file's contents are
// kept (the same file fails the same way); others, such as a failed read,
// are forgotten so that a later call tries again.
func (c *Cache) settle(key string, e *cacheEntry) {
	if e.err != nil && !errors.Is(e.err, ErrMalformed) && !errors.Is(e.err, ErrUnsupportedMachine) {
		c.mu.Lock()
		delete(c.entries, key)
		c.mu.Unlock()
	}
	close(e.ready)
}

func (e *cacheEntry) wait() (*Table, error) {
	<-e.ready
	return e.tab, e.err
}

func (c *Cache) lookup(key string) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e, ok
}

// claim returns the entry for key, creating it if needed; owner says that
// this caller created it and must fill it.
func (c *Cache) claim(key string) (e *cacheEntry, owner bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e, false
	}
	e = &cacheEntry{ready: make(chan struct{})}
	c.entries[key] = e
	return e, true
}

// load finds the table of path by content key (memory, then disk) or
// builds it.
func (c *Cache) load(file *os.File, path, idKey string) (*Table, error) {
	f, err := elf.NewFile(file)
	if err != nil {
		return nil, fmt.Errorf("unwind table for %s: %w", path, err)
	}
	id := buildID(f)
	if id == "" {
		return c.loadKey(f, path, idKey, "")
	}
	key := contentKey(f, id)
	e, owner := c.claim(key)
	if !owner {
		return e.wait()
	}
	e.tab, e.err = c.loadKey(f, path, key, id)
	c.settle(key, e)
	return e.tab, e.err
}

// FileKey names the unwind information of the ELF file f whose status is
// st, as the cache does: by build-id (with the sizes of its frame
// sections, since a separate debug file shares its program's build-id but
// not its CFI), else by device, inode, size and modification time. The
// key is a valid file name (diskcache).
func FileKey(f *elf.File, st os.FileInfo) string {
	if id := buildID(f); id != "" {
		return contentKey(f, id)
	}
	return fileIdentity(st)
}

func contentKey(f *elf.File, id string) string { return id + "-" + frameSizes(f) }

// cfiVersion names the stored tables' format: it changes whenever
// Build's output for the same input may change, so that tables from an
// older memtrace are rebuilt, not trusted.
const cfiVersion = "cfi3-"

// loadKey reads the table stored under key, or builds and stores it.
// A file without CFI of its own takes its separate debug file's
// (.debug_frame), found by build-id id.
func (c *Cache) loadKey(f *elf.File, path, key, id string) (*Table, error) {
	if c.store != nil {
		b, err := c.store.Get(cfiVersion + key)
		var tab *Table
		if err == nil {
			tab, err = Decode(b)
		}
		if err == nil {
			return tab, nil
		}
		if !errors.Is(err, diskcache.ErrMiss) {
			slog.Debug("unwind cache: rebuilding", "key", key, "err", err)
		}
	}
	c.builds.Add(1)
	tab, err := Build(f)
	if err != nil {
		return nil, fmt.Errorf("unwind table for %s: %w", path, err)
	}
	if len(tab.Rows) == 0 && id != "" {
		if dt := c.debugTable(id); dt != nil {
			tab = dt
		}
	}
	if c.store != nil {
		b, err := tab.Encode()
		if err == nil {
			err = c.store.Put(cfiVersion+key, b)
		}
		if err != nil {
			slog.Debug("unwind cache: not stored", "key", key, "err", err)
		}
	}
	return tab, nil
}

// debugTable builds the table of the separate debug file with build-id
// id (/usr/lib/debug/.build-id/ab/cdef….debug), or returns nil.
func (c *Cache) debugTable(id string) *Table {
	if len(id) < 3 {
		return nil
	}
	name := filepath.Join(c.debugRoot, ".build-id", id[:2], id[2:]+".debug")
	f, err := elf.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	if buildID(f) != id {
		return nil
	}
	tab, err := Build(f)
	if err != nil {
		slog.Debug("unwind: separate debug file", "file", name, "err", err)
		return nil
	}
	return tab
}

// fileIdentity names a file's current contents without reading them.
func fileIdentity(st os.FileInfo) string {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("f-%x-%x-%x-%x", s.Dev, s.Ino, st.Size(), st.ModTime().UnixNano())
	}
	return fmt.Sprintf("f-%x-%x", st.Size(), st.ModTime().UnixNano())
}

// buildID returns the hex GNU build-id of f, or "".
func buildID(f *elf.File) string {
	var notes [][]byte
	if s := f.Section(".note.gnu.build-id"); s != nil {
		if d, err := s.Data(); err == nil {
			notes = append(notes, d)
		}
	}
	if len(notes) == 0 {
		for _, p := range f.Progs {
			if p.Type != elf.PT_NOTE {
				continue
			}
			d := make([]byte, p.Filesz)
			if _, err := p.ReadAt(d, 0); err == nil {
				notes = append(notes, d)
			}
		}
	}
	for _, d := range notes {
		if id := findBuildID(d); id != nil {
			return hex.EncodeToString(id)
		}
	}
	return ""
}

// ntGNUBuildID is NT_GNU_BUILD_ID (elf.h), which debug/elf does not name.
const ntGNUBuildID = 3

// findBuildID walks ELF notes for NT_GNU_BUILD_ID.
func findBuildID(d []byte) []byte {
	for len(d) >= 12 {
		nameSz := binary.LittleEndian.Uint32(d)
		descSz := binary.LittleEndian.Uint32(d[4:])
		typ := binary.LittleEndian.Uint32(d[8:])
		nameEnd := 12 + (uint64(nameSz)+3)&^3
		descEnd := nameEnd + (uint64(descSz)+3)&^3
		if descEnd > uint64(len(d)) {
			return nil
		}
		name := d[12 : 12+nameSz]
		if typ == ntGNUBuildID && bytes.Equal(name, []byte("GNU\x00")) && descSz > 0 {
			return d[nameEnd : nameEnd+uint64(descSz)]
		}
		d = d[descEnd:]
	}
	return nil
}

// frameSizes distinguishes files that share a build-id but not their CFI
// (a program and its separate debug file; Go's function table counts as
// CFI, see Build).
func frameSizes(f *elf.File) string {
	size := func(name string) uint64 {
		if s := f.Section(name); s != nil && s.Type != elf.SHT_NOBITS {
			return s.Size
		}
		return 0
	}
	return fmt.Sprintf("%x-%x-%x", size(".eh_frame"), size(".debug_frame"), size(".gopclntab"))
}
