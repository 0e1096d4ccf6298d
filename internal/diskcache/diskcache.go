// Package diskcache keeps derived data (memtrace's unwind tables) in one
// directory between runs: entries named by validated keys, checksummed,
// written without following symlinks, bounded in total size with the
// least recently used evicted. A damaged entry reads as a miss and is
// removed: it is rebuilt, never trusted. Several processes may use one
// directory at once: an entry is renamed into place whole.
package diskcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Sentinel errors callers branch on.
var (
	// ErrMiss: no entry under the key.
	ErrMiss = errors.New("not in the cache")
	// ErrDamaged: an entry failed its checks (and was removed).
	ErrDamaged = errors.New("damaged cache entry")
	// ErrUnsafeDir: the directory is not a directory of memtrace's own
	// (a symlink, another owner, open to others).
	ErrUnsafeDir = errors.New("unsafe cache directory")
)

// The entry format: magic, the caller's format version, the payload's
// length, the payload, a CRC-32C of all before it.
const (
	magic     = "MTCACHE1"
	headerLen = len(magic) + 4 + 8
	trailLen  = 4
	// tmpPrefix names entries being written; ones older than staleTmp
	// were left by a process that died writing, and are removed.
	tmpPrefix = ".tmp-"
	staleTmp  = time.Hour
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Store is one cache directory.
type Store struct {
	dir      string
	maxBytes int64
	version  uint32
	// mu guards known: the bytes the directory held at this store's last
	// listing, plus what it wrote since; -1 before the first. A listing
	// takes one stat per entry (3 841 entries: 60 ms), and a first run of
	// node writes 20 entries: the store lists at its first write, then
	// only when its own writes take the estimate past the bound. Other
	// memtraces' writes count from its next listing.
	mu       sync.Mutex
	known    int64
	listings int // for the tests
}

// DefaultDir is the cache directory: $MEMTRACE_CACHE_DIR when set, else
// /var/cache/memtrace for root, else $XDG_CACHE_HOME/memtrace
// (~/.cache/memtrace); "" when there is none.
func DefaultDir() string {
	if d := os.Getenv("MEMTRACE_CACHE_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/memtrace"
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "memtrace")
}

// Open opens (creating it, mode 0700) the cache directory dir, holding at
// most maxBytes of entries of format version. It refuses a directory that
// is a symlink, belongs to another user or is open to others (ErrUnsafeDir):
// entries come back as trusted tables.
func Open(dir string, maxBytes int64, version uint32) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("create cache directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create cache directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, fmt.Errorf("%w: %s is not a directory", ErrUnsafeDir, dir)
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%w: %s belongs to uid %d", ErrUnsafeDir, dir, st.Uid)
	case st.Mode&0o022 != 0:
		// Others could have put entries in it.
		return nil, fmt.Errorf("%w: %s has mode %#o, writable by others", ErrUnsafeDir, dir, st.Mode&0o777)
	case st.Mode&0o077 != 0:
		// Ours, readable by others (an older memtrace made it 0755): ours alone now.
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("cache directory: %w", err)
		}
	}
	return &Store{dir: dir, maxBytes: maxBytes, version: version, known: -1}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// validKey reports whether key may name a file: letters, digits, '-',
// '_' and '.', not first, at most 200 bytes. Keys made from what a traced
// program controls (a build-id) must pass this before they become paths.
func validKey(key string) bool {
	if key == "" || len(key) > 200 || key[0] == '.' || key[0] == '-' {
		return false
	}
	for _, c := range []byte(key) {
		ok := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Get returns the payload stored under key: ErrMiss when there is none,
// ErrDamaged (after removing it) when it fails its checks. A hit makes the
// entry the most recently used.
func (s *Store) Get(key string) ([]byte, error) {
	if !validKey(key) {
		return nil, fmt.Errorf("cache key %q: %w", key, ErrMiss)
	}
	name := filepath.Join(s.dir, key)
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, ErrMiss
		}
		return nil, fmt.Errorf("open cache entry %s: %w", key, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat cache entry %s: %w", key, err)
	}
	if !st.Mode().IsRegular() || st.Size() < int64(headerLen+trailLen) {
		s.remove(key)
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrDamaged, key, st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read cache entry %s: %w", key, err)
	}
	payload, err := s.unwrap(b)
	if err != nil {
		s.remove(key)
		return nil, fmt.Errorf("%w: %s: %v", ErrDamaged, key, err)
	}
	// Least recently used: the modification time says when it was last used.
	now := time.Now()
	_ = unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(now.UnixNano()), unix.NsecToTimeval(now.UnixNano())})
	return payload, nil
}

func (s *Store) unwrap(b []byte) ([]byte, error) {
	body, sum := b[:len(b)-trailLen], binary.LittleEndian.Uint32(b[len(b)-trailLen:])
	if string(body[:len(magic)]) != magic {
		return nil, errors.New("bad magic")
	}
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errors.New("checksum")
	}
	if v := binary.LittleEndian.Uint32(body[len(magic):]); v != s.version {
		return nil, fmt.Errorf("version %d, want %d", v, s.version)
	}
	n := binary.LittleEndian.Uint64(body[len(magic)+4:])
	if n != uint64(len(body)-headerLen) {
		return nil, fmt.Errorf("%d bytes of payload, header says %d", len(body)-headerLen, n)
	}
	return body[headerLen:], nil
}

// Put stores payload under key: written to a new file of its own
// (O_EXCL|O_NOFOLLOW: nothing planted in the directory is written
// through), then renamed over the entry, so readers see the old entry or
// the whole new one. Then, if the store may be past its bound (see
// known), the least recently used entries go until it holds 7/8 of it.
func (s *Store) Put(key string, payload []byte) error {
	if !validKey(key) {
		return fmt.Errorf("cache key %q: not a valid name", key)
	}
	b := make([]byte, 0, headerLen+len(payload)+trailLen)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, s.version)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	b = append(b, payload...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	if int64(len(b)) > s.maxBytes {
		return fmt.Errorf("cache entry %s: %d bytes, over the cache's %d", key, len(b), s.maxBytes)
	}
	var rnd [8]byte
	if _, err := unix.Getrandom(rnd[:], 0); err != nil {
		return fmt.Errorf("name cache entry: %w", err)
	}
	tmp := filepath.Join(s.dir, fmt.Sprintf("%s%s-%x", tmpPrefix, key, rnd))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create cache entry %s: %w", key, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write cache entry %s: %w", key, err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, key)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store cache entry %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known >= 0 {
		s.known += int64(len(b))
		if s.known <= s.maxBytes {
			return nil
		}
	}
	return s.evict()
}

func (s *Store) remove(key string) { _ = os.Remove(filepath.Join(s.dir, key)) }

// evict removes the least recently used entries (oldest modification
// time) until the store holds at most its bound, and temporary files
// that writers left behind.
func (s *Store) evict() error {
	s.listings++
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("list cache: %w", err)
	}
	type entry struct {
		name string
		size int64
		used time.Time
	}
	var all []entry
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue // gone meanwhile (another memtrace evicting), or not ours
		}
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if time.Since(info.ModTime()) > staleTmp {
				_ = os.Remove(filepath.Join(s.dir, e.Name()))
			}
			continue
		}
		all = append(all, entry{e.Name(), info.Size(), info.ModTime()})
		total += info.Size()
	}
	defer func() { s.known = total }()
	if total <= s.maxBytes {
		return nil
	}
	// Down to 7/8 of the bound: a full cache is not listed again at the
	// next write, but after an eighth of the bound more.
	low := s.maxBytes - s.maxBytes/8
	slices.SortFunc(all, func(a, b entry) int { return a.used.Compare(b.used) })
	for _, e := range all {
		if total <= low {
			break
		}
		if err := os.Remove(filepath.Join(s.dir, e.name)); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= e.size
		}
	}
	return nil
}
