package symbolize

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileKey identifies one version of a file without reading it: the same
// device and inode with the same size and modification time is taken to
// be the same bytes.
type fileKey struct {
	dev, ino uint64
	size     int64
	mtimeNS  int64
}

func keyOf(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{
		dev:     uint64(st.Dev),
		ino:     st.Ino,
		size:    st.Size,
		mtimeNS: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
	}, true
}

// cacheEntry remembers an opened module, or why a file could not be one
// (so a file that is not ELF is not re-read on every capture), and a path
// that names the file from our root, if one was seen ("" otherwise).
type cacheEntry struct {
	mod  *Module
	err  error
	path string
}

// moduleCache shares modules between processes and captures. A module is
// found by its file's identity first (a stat, no read); a newly opened file
// whose GNU build-id is already known reuses that module, since the build-id
// names the code, wherever the file lives (another container's copy, a
// reinstalled package).
type moduleCache struct {
	debugDirs  []string    // global debug directories (WithDebugDirs)
	debuginfod *Debuginfod // nil: no downloads (WithDebuginfod)

	mu        sync.Mutex
	byFile    map[fileKey]cacheEntry
	byBuildID map[string]*Module
	all       []*Module // every module opened, for close
}

func newModuleCache(debugDirs ...string) *moduleCache {
	return &moduleCache{debugDirs: debugDirs, byFile: map[fileKey]cacheEntry{}, byBuildID: map[string]*Module{}}
}

// origin says where a module's file lives as its process names it, so that
// its separate debug file can be looked for: modPath is the mapped path,
// roots the prefixes to try ("/proc/PID/root", then "" for our own root).
type origin struct {
	modPath string
	roots   []string
	ourPath bool // modPath names the file from our root, not only from the process's
}

// module returns the module for the file at path, opening it if it is not
// cached. wantIno, when not 0, must match the file's inode: a path reached
// by name may by now hold a different file than the one mapped. A newly
// opened module gets the separate debug files that exist for it (checked
// on first use).
func (c *moduleCache) module(path string, wantIno uint64, from origin) (*Module, error) {
	// Opened, then checked: what a path names can change between a stat
	// and an open, and the process may own the directories on the way
	// (openModuleFile). Not remembered on failure: running out of
	// descriptors passes.
	f, err := openModuleFile(path)
	if err != nil {
		return nil, fmt.Errorf("open module: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat module: %w", err)
	}
	key, ok := keyOf(fi)
	if !ok {
		f.Close()
		return nil, errors.New("stat module: no inode information")
	}
	if wantIno != 0 && key.ino != wantIno {
		f.Close()
		return nil, fmt.Errorf("module %s: inode %d is not the mapped %d", path, key.ino, wantIno)
	}
	c.mu.Lock()
	e, ok := c.byFile[key]
	c.mu.Unlock()
	if ok {
		f.Close()
		return e.mod, e.err
	}

	// Parsed without the lock: parsing headers reads the file, and other
	// captures should not wait for it. Two racing opens of one file both
	// parse; the first to register wins.
	mod, err := newModule(f, f)
	if err != nil {
		f.Close()
		err = fmt.Errorf("module %s: %w", path, err)
	}
	if mod != nil {
		mod.debugCands = findDebugFiles(mod, from.modPath, from.roots, c.debugDirs)
		if c.debuginfod != nil && wantsDebuginfod(mod) {
			mod.fetch = c.debuginfod.start(mod.buildID) // once per build-id
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byFile[key]; ok {
		if mod != nil {
			mod.Close()
		}
		return e.mod, e.err
	}
	if mod != nil {
		if id := mod.BuildID(); id == "" {
			c.all = append(c.all, mod)
		} else if known, ok := c.byBuildID[id]; ok {
			mod.Close()
			mod = known
		} else {
			c.byBuildID[id] = mod
			c.all = append(c.all, mod)
		}
	}
	entry := cacheEntry{mod: mod, err: err}
	if from.ourPath {
		entry.path = from.modPath
	}
	c.byFile[key] = entry
	return mod, err
}

// opened returns the module opened for the file that the kernel names by
// device dev and inode ino, of size bytes (0: unknown), that fits, with
// the path it was opened by from our root ("" if none), or nil. A device
// that differs is taken only where stat(2) gives a device of its own
// (sameDevice); then the only fitting module with that inode is taken.
func (c *moduleCache) opened(dev, ino, size uint64, fits func(*Module) bool) (*Module, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var other cacheEntry
	n := 0
	for k, e := range c.byFile {
		if k.ino != ino || e.mod == nil || (size != 0 && uint64(k.size) != size) || !sameDevice(k.dev, dev) || !fits(e.mod) {
			continue
		}
		if k.dev == dev {
			return e.mod, e.path
		}
		if e.mod != other.mod {
			other = e
			n++
		}
	}
	if n == 1 {
		return other.mod, other.path
	}
	return nil, ""
}

// sameDevice reports whether stat(2)'s device statDev may be the kernel's
// kernelDev: equal, or a device number of stat's own (major 0: overlayfs
// gives each layer a pseudo device, btrfs each subvolume one, while the
// kernel's file is on the layer's or the filesystem's device).
func sameDevice(statDev, kernelDev uint64) bool {
	return statDev == kernelDev || unix.Major(statDev) == 0
}

// close releases every cached module's file.
func (c *moduleCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, m := range c.all {
		errs = append(errs, m.Close())
	}
	c.all = nil
	c.byFile = map[fileKey]cacheEntry{}
	c.byBuildID = map[string]*Module{}
	return errors.Join(errs...)
}
