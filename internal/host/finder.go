package host

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/tracer"
)

// Finder finds, process by process, the probes not yet placed. Not safe
// for concurrent use.
type Finder struct {
	// Allocator (--allocator) is probed in every process first.
	Allocator string
	// Self is memtrace's PID, never scanned.
	Self int
	// Extra, when set, gives more probes for a process's modules (the
	// --mark functions): placed, like the allocator's, once per file.
	Extra func(mods []allocator.Module) []allocator.Probe

	placed map[probeKey]bool
	files  map[fileKey]string // each file probed, by identity: its name in the first process seen
}

type fileKey struct{ dev, ino uint64 }

type probeKey struct {
	file   fileKey
	offset uint64
}

// Found is what a scan of one process found.
type Found struct {
	// New are the probes on files (or functions of files) not probed yet.
	New []tracer.Placement
	// Missing lists the libraries the process needs and has not mapped
	// yet (right after exec): scan it again shortly.
	Missing []string
	// Files is how many distinct files its allocator functions bind to.
	Files int

	keys []probeKey // of New
}

// ErrNoAllocator: the process binds no malloc and free (a kernel thread,
// a Go program); nothing to probe.
var ErrNoAllocator = allocator.ErrNotFound

// Scan finds pid's allocator (as -p would) and returns its probes that
// are not placed yet. Call Placed once they are attached.
func (f *Finder) Scan(pid int) (Found, error) {
	if pid == f.Self {
		return Found{}, fmt.Errorf("process %d is memtrace itself", pid)
	}
	if _, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil {
		// A kernel thread (no executable), or gone.
		return Found{}, fmt.Errorf("process %d: %w", pid, ErrNoAllocator)
	}
	mods, err := allocator.ForProcess(pid)
	if err != nil {
		return Found{}, err
	}
	var found Found
	if found.Missing = allocator.Missing(pid, mods); len(found.Missing) > 0 {
		return found, nil
	}
	if f.Allocator != "" {
		mods = append([]allocator.Module{{Path: f.Allocator, Module: f.Allocator, Exe: true}}, mods...)
	}
	probes, err := allocator.Bind(mods)
	if err != nil {
		return found, fmt.Errorf("process %d: %w", pid, err)
	}
	if f.Extra != nil {
		probes = append(probes, f.Extra(mods)...)
	}
	var fresh []allocator.Probe
	files := map[fileKey]bool{}
	for _, p := range probes {
		id, err := allocator.Identify(p.Path)
		if err != nil {
			continue // gone or unreadable; another process may show it
		}
		k := probeKey{fileKey{id.Dev, id.Ino}, p.Offset}
		files[k.file] = true
		if !f.placed[k] && !slices.Contains(found.keys, k) {
			fresh = append(fresh, p)
			found.keys = append(found.keys, k)
		}
	}
	found.Files = len(files)
	if len(fresh) > 0 {
		found.New = tracer.Place(fresh)
	}
	return found, nil
}

// Placed records a scan's new probes as attached: later scans leave them out.
func (f *Finder) Placed(found Found) {
	if f.placed == nil {
		f.placed, f.files = map[probeKey]bool{}, map[fileKey]string{}
	}
	for i, k := range found.keys {
		f.placed[k] = true
		if found.New[i].Func.Mark() {
			continue // not an allocator's file for that (Files)
		}
		if _, ok := f.files[k.file]; !ok {
			f.files[k.file] = found.New[i].Module
		}
	}
}

// Files lists the distinct allocator files probed, by the name the first process
// that mapped each gave it.
func (f *Finder) Files() []string {
	var out []string
	for _, name := range f.files {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ByPath splits a scan's new probes by the file path they were found
// under, one Found each: they are attached one file at a time, and each
// is recorded as placed only once its own attachment succeeded.
func (found Found) ByPath() []Found {
	var out []Found
	at := map[string]int{}
	for i, p := range found.New {
		j, ok := at[p.Path]
		if !ok {
			j = len(out)
			at[p.Path] = j
			out = append(out, Found{Files: 1})
		}
		out[j].New = append(out[j].New, p)
		out[j].keys = append(out[j].keys, found.keys[i])
	}
	return out
}
