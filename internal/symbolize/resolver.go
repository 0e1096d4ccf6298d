package symbolize

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/memtrace/memtrace/internal/procfs"
)

// Resolver resolves code addresses of processes. Safe for concurrent use.
//
// It keeps, per process, the executable mappings of its last capture, and,
// shared by all processes, every module it opened: a module stays open after
// its process exits, so addresses captured before the exit still resolve.
type Resolver struct {
	mods *moduleCache

	mu    sync.RWMutex
	procs map[int]*process

	py pythonFrames // Python frames (python.go)

	changed func(pid int) // OnChange (recorded.go)
	offline bool          // Offline: never read /proc

	jitMu sync.Mutex
	jits  map[int]*jitSource // perf maps and jitdumps (jit.go)
	log   *slog.Logger
}

// maxMisses bounds the remembered misses per capture.
const maxMisses = 1024

// NewResolver returns an empty resolver. By default separate debug files
// are looked for under /usr/lib/debug (see WithDebugDirs).
func NewResolver(opts ...Option) *Resolver {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	mods := newModuleCache(o.debugDirs...)
	mods.debuginfod = o.debuginfod
	log := o.log
	if log == nil {
		log = slog.Default()
	}
	return &Resolver{mods: mods, procs: map[int]*process{}, log: log}
}

// Capture reads /proc/PID/maps now and opens the module of every
// file-backed executable mapping. Call it when a process is attached and
// again before it exits; each call adds the mappings now present, keeping
// earlier ones that nothing has been mapped over since (code unloaded in
// between still resolves); modules stay cached. The error matches os.ErrNotExist when the process
// is gone. A module that cannot be opened is not an error: its addresses
// resolve to the mapping's path and offset only.
func (r *Resolver) Capture(pid int) error {
	p, err := r.capture(pid)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if old := r.procs[pid]; old != nil {
		// Keep what is no longer mapped (unloaded libraries) resolvable.
		p.maps = mergeMappings(old.maps, p.maps)
	}
	r.procs[pid] = p
	r.mu.Unlock()
	r.noteChange(pid)
	return nil
}

func (r *Resolver) capture(pid int) (*process, error) {
	maps, err := readProcMaps(pid)
	if err != nil {
		return nil, fmt.Errorf("capture process %d: %w", pid, err)
	}
	r.refreshJIT(pid, maps) // JIT code compiled since (jit.go)
	p := &process{}
	roots := processRoots(pid)
	for _, m := range maps {
		if !m.Executable() {
			continue // return addresses point into code only
		}
		p.maps = append(p.maps, codeMapping{
			start: m.Start, end: m.End, offset: m.Offset,
			path: m.Path, mod: r.moduleFor(pid, m, roots),
		})
	}
	slices.SortFunc(p.maps, func(a, b codeMapping) int { return cmp.Compare(a.start, b.start) })
	return p, nil
}

// moduleFor opens the module of a mapping through the first location that
// works, or returns nil.
func (r *Resolver) moduleFor(pid int, m procfs.Mapping, roots []string) *Module {
	if !m.FileBacked() {
		return nil
	}
	for _, c := range moduleCandidates(pid, m) {
		if !strings.HasPrefix(c.path, "/") {
			continue
		}
		// A file that is there but no readable ELF fails again, cheaply,
		// through the other names: its failure is cached by identity.
		if mod, err := r.mods.module(c.path, c.wantIno, origin{modPath: m.Path, roots: roots, ourPath: true}); err == nil {
			return mod
		}
	}
	return nil
}

// Prepare reads, in the background, the function symbols of the modules
// pid had mapped at its last capture. A short-lived command's leak check
// and report, at its exit, then find them read while it ran (node's table
// took ~75 ms there), on another core if there is one. Debug files are
// not read ahead: they are bigger, and only the sites a report names need
// them.
func (r *Resolver) Prepare(pid int) {
	r.mu.RLock()
	p := r.procs[pid]
	var mods []*Module
	if p != nil {
		for _, m := range p.maps {
			if m.mod != nil && !slices.Contains(mods, m.mod) {
				mods = append(mods, m.mod)
			}
		}
	}
	r.mu.RUnlock()
	if len(mods) == 0 {
		return
	}
	go func() {
		for _, m := range mods {
			m.symOnce.Do(m.loadSymbols)
		}
	}()
}

// Resolve returns the frame for a return address ret in process pid: the
// call instruction before ret (decoded; ret-1 when it cannot be), its
// function, file:line and inline chain. An address in no captured mapping
// makes it capture the process once more (if it still lives) and retry.
//
// Frame.Address is ret; Offset is the ELF virtual address of the call
// instruction (the file offset of ret-1 when the module could not be read).
func (r *Resolver) Resolve(pid int, ret uint64) Frame {
	if ret == 0 {
		return Frame{}
	}
	if IsPython(ret) {
		f, _ := r.pythonFrame(ret)
		return f
	}
	if f, ok := execveFrame(ret); ok {
		return f
	}
	pc := ret - 1
	r.mu.RLock()
	p := r.procs[pid]
	r.mu.RUnlock()
	if p != nil {
		if m, ok := p.find(pc); ok {
			return r.frameIn(pid, m, ret, pc)
		}
	}
	if p = r.recapture(pid, p, pc); p != nil {
		if m, ok := p.find(pc); ok {
			return r.frameIn(pid, m, ret, pc)
		}
		r.noteMiss(p, pc)
	}
	// Code unmapped since (a runtime freed it) may still have its name.
	if f, ok := r.jitFrame(pid, ret, pc, false); ok {
		return f
	}
	return Frame{Address: ret}
}

// frameIn resolves ret in its mapping m: code no file names (JIT code) by
// the process's perf map or jitdump (jit.go), the rest by its module.
func (r *Resolver) frameIn(pid int, m *codeMapping, ret, pc uint64) Frame {
	if m.mod == nil && anonCode(m.path) {
		if f, ok := r.jitFrame(pid, ret, pc, !r.offline); ok {
			return f
		}
	}
	return m.frame(ret, pc)
}

// recapture captures pid again after a miss of pc in old (nil if never
// captured), unless the process is known gone or pc already missed in this
// capture. It returns the capture to retry in, or nil.
func (r *Resolver) recapture(pid int, old *process, pc uint64) *process {
	if r.offline {
		return nil
	}
	if old != nil {
		r.mu.RLock()
		_, missed := old.misses[pc]
		exited := old.exited
		r.mu.RUnlock()
		if missed || exited {
			return nil
		}
	}
	p, err := r.capture(pid)
	if err != nil {
		if old != nil && errors.Is(err, os.ErrNotExist) {
			r.mu.Lock()
			old.exited = true
			r.mu.Unlock()
		}
		return nil
	}
	r.mu.Lock()
	if cur := r.procs[pid]; cur != old {
		// Forgotten, or captured by someone else meanwhile: the newer
		// state stands; still answer from what we just read.
		r.mu.Unlock()
		return p
	}
	if old != nil {
		// As Capture does: unloaded code stays resolvable.
		p.maps = mergeMappings(old.maps, p.maps)
	}
	r.procs[pid] = p
	r.mu.Unlock()
	r.noteChange(pid)
	return p
}

func (r *Resolver) noteMiss(p *process, pc uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.misses == nil || len(p.misses) >= maxMisses {
		p.misses = map[uint64]struct{}{}
	}
	p.misses[pc] = struct{}{}
}

// Forget drops a process's mappings. Modules stay cached. Call it once a
// process's addresses are resolved and before its pid can be reused: until
// then, addresses of an exited process resolve with its last capture.
func (r *Resolver) Forget(pid int) {
	r.mu.Lock()
	delete(r.procs, pid)
	r.mu.Unlock()
	r.forgetJIT(pid)
}

// Close releases every cached module. The resolver must not be used after.
func (r *Resolver) Close() error {
	r.mu.Lock()
	r.procs = map[int]*process{}
	r.mu.Unlock()
	return r.mods.close()
}
