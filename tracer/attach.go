package tracer

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
)

// ErrProcessGone: the process exited while probes were being attached.
var ErrProcessGone = errors.New("process exited")

// Attachment is the set of probes placed for one process.
type Attachment struct {
	PID int
	// Return and entry probes are kept apart: they are placed and removed
	// in opposite orders.
	returns, entries []link.Link
	// placed records which (file, offset) pairs are already probed, so that a
	// second Attach after exec only adds what is new.
	placed map[string]bool
}

// needsReturn reports whether fn's probes include a return probe: every
// allocating function and wrapper does; free, munmap and marks act at entry.
func needsReturn(fn event.Func) bool {
	return fn != event.FuncFree && fn != event.FuncMunmap && fn < event.FuncMark
}

// Placement is where one function's probes go.
type Placement struct {
	allocator.Probe
	// Skip is how many bytes past the function's start both probes sit.
	Skip int
	// Why explains Skip, for --verbose.
	Why string
}

// Place decides each probe's offset with EntryOffset. Functions whose code
// cannot be read are probed at +0.
func Place(probes []allocator.Probe) []Placement {
	out := make([]Placement, 0, len(probes))
	for _, p := range probes {
		pl := Placement{Probe: p}
		code, err := readCode(p)
		if err != nil {
			pl.Why = err.Error()
		} else {
			pl.Skip, pl.Why = EntryOffset(code, arity(p.Func))
		}
		out = append(out, pl)
	}
	return out
}

// arity is how many integer arguments of fn the BPF programs read.
func arity(fn event.Func) int {
	switch fn {
	case event.FuncMalloc, event.FuncValloc, event.FuncPvalloc, event.FuncFree:
		return 1
	case event.FuncCalloc, event.FuncRealloc, event.FuncAlignedAlloc, event.FuncMemalign, event.FuncMunmap:
		return 2
	case event.FuncReallocarray, event.FuncPosixMemalign, event.FuncMremap:
		return 3
	case event.FuncMmap:
		return 4
	case event.FuncWrapper, event.FuncDlopen:
		// The wrapper probe reads only sp and [sp]; dlopen's entry nothing.
		return 0
	}
	return 6
}

// readCode reads a function's bytes (at most 4 KiB: enough for the
// straight-line entry and the branches near it).
func readCode(p allocator.Probe) ([]byte, error) {
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, fmt.Errorf("read code of %s: %w", p.Symbol, err)
	}
	defer f.Close()
	n := p.Size
	if n == 0 || n > 4096 {
		n = 4096
	}
	b := make([]byte, n)
	m, err := f.ReadAt(b, int64(p.Offset))
	if m == 0 && err != nil {
		return nil, fmt.Errorf("read code of %s: %w", p.Symbol, err)
	}
	return b[:m], nil
}

// Attach places the probes for pid (only that process pays the trap): per
// file, one uprobe_multi link for the return probes and one for the entry
// probes, the attach cookie naming each function. Return probes go in first:
// an entry seen without its return would leave the thread's in-flight state
// behind. Calling it again for the same Attachment adds only probes not yet
// placed.
func (t *Objects) Attach(a *Attachment, probes []Placement) error {
	if a.placed == nil {
		a.placed = map[string]bool{}
	}
	byPath := map[string][]Placement{}
	var paths []string
	for _, p := range probes {
		key := fmt.Sprintf("%s@%#x", p.Path, p.Offset)
		if a.placed[key] {
			continue
		}
		if _, ok := byPath[p.Path]; !ok {
			paths = append(paths, p.Path)
		}
		byPath[p.Path] = append(byPath[p.Path], p)
	}
	for _, path := range paths {
		ex, err := link.OpenExecutable(path)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		var entry, ret link.UprobeMultiOptions
		entry.PID, ret.PID = uint32(a.PID), uint32(a.PID)
		for _, p := range byPath[path] {
			addr := p.Offset + uint64(p.Skip)
			entry.Addresses = append(entry.Addresses, addr)
			entry.Cookies = append(entry.Cookies, uint64(p.Func))
			if needsReturn(p.Func) {
				ret.Addresses = append(ret.Addresses, addr)
				ret.Cookies = append(ret.Cookies, uint64(p.Func))
			}
		}
		first := byPath[path][0].Probe
		if len(ret.Addresses) > 0 {
			l, err := ex.UretprobeMulti(nil, t.objs.Ret, &ret)
			if err != nil {
				return attachError("return probes", first, a.PID, err)
			}
			a.returns = append(a.returns, l)
		}
		l, err := ex.UprobeMulti(nil, t.objs.Entry, &entry)
		if err != nil {
			return attachError("entry probes", first, a.PID, err)
		}
		a.entries = append(a.entries, l)
		for _, p := range byPath[path] {
			a.placed[fmt.Sprintf("%s@%#x", p.Path, p.Offset)] = true
		}
	}
	return nil
}

func attachError(kind string, p allocator.Probe, pid int, err error) error {
	switch {
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("attach %s in %s to process %d: %w", kind, p.Module, pid, ErrProcessGone)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("attach %s in %s: %w", kind, p.Module, ErrPermission)
	case isNotSupported(err):
		return fmt.Errorf("attach %s in %s: %w (%w)", kind, p.Module, ErrNoUprobes, err)
	}
	return fmt.Errorf("attach %s in %s: %w", kind, p.Module, err)
}

// Detach removes pid's probes. Each removal waits for the kernel's RCU
// grace period (about 0.1 s here), so they run concurrently: entry probes
// first, for the reason Attach places return probes first, then the rest.
func (a *Attachment) Detach() error {
	err := errors.Join(closeAll(a.entries), closeAll(a.returns))
	a.entries, a.returns, a.placed = nil, nil, nil
	return err
}

func closeAll(links []link.Link) error {
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Probes is how many functions carry the Attachment's probes.
func (a *Attachment) Probes() int { return len(a.placed) }
