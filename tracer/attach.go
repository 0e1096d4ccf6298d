package tracer

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/event"
)

// ErrProcessGone: the process exited while probes were being attached.
var ErrProcessGone = errors.New("process exited")

// Attachment is the set of probes placed for one process.
type Attachment struct {
	PID   int
	links []link.Link
	// placed records which (file, offset) pairs are already probed, so that a
	// second Attach after exec only adds what is new.
	placed map[string]bool
}

// programs returns the entry and return programs of fn (ret nil: entry only).
func (t *Objects) programs(fn event.Func) (entry, ret *ebpf.Program) {
	e, needRet := t.entryProgram(fn)
	switch {
	case fn == event.FuncWrapper:
		return e, t.objs.WrapperReturn
	case needRet:
		return e, t.objs.AllocReturn
	}
	return e, nil
}

func (t *Objects) entryProgram(fn event.Func) (*ebpf.Program, bool) {
	p := &t.objs.memtracePrograms
	switch fn {
	case event.FuncWrapper:
		return p.WrapperEnter, true
	case event.FuncMalloc:
		return p.MallocEnter, true
	case event.FuncCalloc:
		return p.CallocEnter, true
	case event.FuncRealloc:
		return p.ReallocEnter, true
	case event.FuncReallocarray:
		return p.ReallocarrayEnter, true
	case event.FuncPosixMemalign:
		return p.PosixMemalignEnter, true
	case event.FuncAlignedAlloc:
		return p.AlignedAllocEnter, true
	case event.FuncMemalign:
		return p.MemalignEnter, true
	case event.FuncValloc:
		return p.VallocEnter, true
	case event.FuncPvalloc:
		return p.PvallocEnter, true
	case event.FuncFree:
		return p.FreeEnter, false
	case event.FuncMmap:
		return p.MmapEnter, true
	case event.FuncMunmap:
		return p.MunmapEnter, false
	case event.FuncMremap:
		return p.MremapEnter, true
	}
	return nil, false
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
	case event.FuncWrapper:
		// The wrapper probe reads only sp and [sp].
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

// Attach places the probes for pid (only that process pays the trap). Return
// probes go in first: an entry seen without its return would leave the
// thread's in-flight state behind. Calling it again for the same Attachment
// adds only probes not yet placed (after an exec).
func (t *Objects) Attach(a *Attachment, probes []Placement) error {
	if a.placed == nil {
		a.placed = map[string]bool{}
	}
	var todo []Placement
	for _, p := range probes {
		if key := fmt.Sprintf("%s@%#x", p.Path, p.Offset); !a.placed[key] {
			todo = append(todo, p)
		}
	}
	exes := map[string]*link.Executable{}
	open := func(path string) (*link.Executable, error) {
		if ex, ok := exes[path]; ok {
			return ex, nil
		}
		ex, err := link.OpenExecutable(path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		exes[path] = ex
		return ex, nil
	}
	for pass := 0; pass < 2; pass++ {
		for _, p := range todo {
			entry, ret := t.programs(p.Func)
			if entry == nil {
				return fmt.Errorf("no program for %s", p.Func)
			}
			ex, err := open(p.Path)
			if err != nil {
				return err
			}
			opts := &link.UprobeOptions{PID: a.PID, Address: p.Offset + uint64(p.Skip)}
			var l link.Link
			switch {
			case pass == 0 && ret != nil:
				l, err = ex.Uretprobe(p.Symbol, ret, opts)
				if err != nil {
					return attachError("uretprobe", p.Probe, a.PID, err)
				}
			case pass == 1:
				l, err = ex.Uprobe(p.Symbol, entry, opts)
				if err != nil {
					return attachError("uprobe", p.Probe, a.PID, err)
				}
			default:
				continue
			}
			a.links = append(a.links, l)
		}
	}
	for _, p := range todo {
		a.placed[fmt.Sprintf("%s@%#x", p.Path, p.Offset)] = true
	}
	return nil
}

func attachError(kind string, p allocator.Probe, pid int, err error) error {
	switch {
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("attach %s %s to process %d: %w", kind, p.Symbol, pid, ErrProcessGone)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("attach %s %s in %s: %w", kind, p.Symbol, p.Module, ErrPermission)
	case isNotSupported(err):
		return fmt.Errorf("attach %s %s in %s: %w (%w)", kind, p.Symbol, p.Module, ErrNoUprobes, err)
	}
	return fmt.Errorf("attach %s %s in %s: %w", kind, p.Symbol, p.Module, err)
}

// Detach removes pid's probes: entry probes first, for the reason Attach
// places return probes first.
func (a *Attachment) Detach() error {
	var errs []error
	for i := len(a.links) - 1; i >= 0; i-- {
		if err := a.links[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	a.links = nil
	a.placed = nil
	return errors.Join(errs...)
}
