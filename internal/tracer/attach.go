package tracer

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
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
	// keys are the (file, offset) pairs each link probes (DetachStale).
	keys map[link.Link][]string
	// codeFree: the interpreter files whose code_dealloc is probed, and
	// that probe's pair (FreesCode).
	codeFree map[allocator.FileID]string
}

// FreesCode reports whether the interpreter file at path has its
// code_dealloc probed by a (event.FuncPyCodeFree): only then may the
// probes keep code objects' tags (TracePython).
func (a *Attachment) FreesCode(path string) bool {
	id, err := allocator.Identify(path)
	if err != nil {
		return false
	}
	key, ok := a.codeFree[id]
	return ok && a.placed[key]
}

// add records links made for the pairs in keys.
func (a *Attachment) add(links *[]link.Link, l link.Link, keys []string) {
	if a.keys == nil {
		a.keys = map[link.Link][]string{}
	}
	*links = append(*links, l)
	a.keys[l] = keys
}

// needsReturn reports whether p's probes include a return probe: every
// allocating function and wrapper does; free, munmap, marks, CPython's
// code_dealloc and the JVM's category probes act at entry.
func needsReturn(p Placement) bool {
	fn := p.Func
	return p.CategoryArg == 0 && fn.Base() != event.FuncFree && fn != event.FuncMunmap && !fn.Mark() &&
		fn != event.FuncPyCodeFree
}

// cookie is the attach cookie of p's probes: the function's id, or, for a
// JVM category probe, which argument holds the category and how many bytes
// of the function's code follow the probe (mt_jvm_entry).
func cookie(p Placement) uint64 {
	if p.CategoryArg == 0 {
		return uint64(p.Func) | ctxBit(p) | poolBits(p)
	}
	return uint64(p.CategoryArg)&uint64(memtraceJvmCookieJVM_COOKIE_ARG_MASK) |
		(p.Size-min(p.Size, uint64(p.Skip)))<<memtraceJvmCookieJVM_COOKIE_LEN_SHIFT
}

// ctxBit is FUNC_COOKIE_CTX for a function that takes a context first.
func ctxBit(p Placement) uint64 {
	if p.CtxFirst {
		return uint64(memtraceFuncCookieFUNC_COOKIE_CTX)
	}
	return 0
}

// poolBits is FUNC_PY_POOL's pool size, as the cookie holds it (its log2).
func poolBits(p Placement) uint64 {
	if p.Func != event.FuncPyPool || p.PoolSize == 0 {
		return 0
	}
	return uint64(bits.TrailingZeros64(p.PoolSize)) << memtraceFuncCookieFUNC_COOKIE_POOL_SHIFT
}

// sessionCookie is the attach cookie of p's session probe (enum
// func_cookie): the function's id and how many bytes of its code follow
// the probe, so that the probes know which code a call whose return they
// skipped runs (in_outer; 0 when the symbol has no size).
func sessionCookie(p Placement) uint64 {
	return uint64(p.Func) | ctxBit(p) | poolBits(p) | (p.Size-min(p.Size, uint64(p.Skip)))<<memtraceFuncCookieFUNC_COOKIE_LEN_SHIFT
}

// entryProg is the entry program of p's probe.
func (t *Objects) entryProg(p Placement) *ebpf.Program {
	if p.CategoryArg != 0 {
		return t.objs.JvmEntry
	}
	return t.objs.Entry
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
			pl.Skip, pl.Why = EntryOffset(code, arity(p))
		}
		out = append(out, pl)
	}
	return out
}

// arity is how many integer arguments of p's function the BPF programs read.
func arity(p allocator.Probe) int {
	if p.CategoryArg != 0 {
		return p.CategoryArg
	}
	if p.CtxFirst {
		p.CtxFirst = false
		return 1 + arity(p)
	}
	if p.Func == event.FuncPyCodeFree {
		return 1 // the code object
	}
	if p.Func == event.FuncPyPool {
		return 0 // the pool is its return's
	}
	switch p.Func.Base() {
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

// Attach places the probes for pid (only that process pays the trap; 0:
// every process). With uprobe_multi links (AttachMulti), per file one link
// holds the return probes and one the entry probes; otherwise
// (AttachPerProbe) each function gets its own uprobe and uretprobe links.
// Either way the attach cookie names each function. Return probes go in
// first: an entry seen without its return would leave the thread's
// in-flight state behind. Calling it again for the same Attachment adds
// only probes not yet placed. On error nothing of this call stays
// attached: no half-attached process.
func (t *Objects) Attach(a *Attachment, probes []Placement) error {
	if a.placed == nil {
		a.placed = map[string]bool{}
	}
	byPath := map[string][]Placement{}
	var paths []string
	for _, p := range probes {
		if a.placed[placedKey(p)] {
			continue
		}
		if _, ok := byPath[p.Path]; !ok {
			paths = append(paths, p.Path)
		}
		byPath[p.Path] = append(byPath[p.Path], p)
	}
	var made Attachment // the links this call creates
	for _, path := range paths {
		ex, err := link.OpenExecutable(path)
		if err != nil {
			return errors.Join(fmt.Errorf("open %s: %w", path, err), made.Detach())
		}
		switch t.kernel.Attach {
		case AttachPerProbe:
			err = t.attachPerProbe(&made, ex, a.PID, byPath[path])
		case AttachSession:
			err = t.attachSession(&made, ex, path, a.PID, byPath[path])
		default:
			err = t.attachMulti(&made, ex, a.PID, byPath[path])
		}
		if err != nil {
			return errors.Join(err, made.Detach())
		}
	}
	for _, l := range made.returns {
		a.add(&a.returns, l, made.keys[l])
	}
	for _, l := range made.entries {
		a.add(&a.entries, l, made.keys[l])
	}
	for _, p := range probes {
		a.placed[placedKey(p)] = true
		if p.Func != event.FuncPyCodeFree {
			continue
		}
		if id, err := allocator.Identify(p.Path); err == nil {
			if a.codeFree == nil {
				a.codeFree = map[allocator.FileID]string{}
			}
			a.codeFree[id] = placedKey(p)
		}
	}
	return nil
}

func placedKey(p Placement) string { return fmt.Sprintf("%s@%#x", p.Path, p.Offset) }

// attachMulti places one file's probes with two uprobe_multi links (a
// third for the JVM's category probes, whose entry program differs).
func (t *Objects) attachMulti(made *Attachment, ex *link.Executable, pid int, probes []Placement) error {
	var entry, ret, jvm link.UprobeMultiOptions
	var entryKeys, retKeys, jvmKeys []string
	entry.PID, ret.PID, jvm.PID = uint32(pid), uint32(pid), uint32(pid)
	for _, p := range probes {
		if p.CategoryArg != 0 {
			addProbe(&jvm, &jvmKeys, p)
			continue
		}
		addProbe(&entry, &entryKeys, p)
		if needsReturn(p) {
			addProbe(&ret, &retKeys, p)
		}
	}
	first := probes[0].Probe
	if len(ret.Addresses) > 0 {
		l, err := ex.UretprobeMulti(nil, t.objs.Ret, &ret)
		if err != nil {
			return attachError("return probes", first, pid, err)
		}
		made.add(&made.returns, l, retKeys)
	}
	if err := t.attachJVM(made, ex, pid, &jvm, jvmKeys, first); err != nil {
		return err
	}
	if len(entry.Addresses) == 0 {
		return nil
	}
	l, err := ex.UprobeMulti(nil, t.objs.Entry, &entry)
	if err != nil {
		return attachError("entry probes", first, pid, err)
	}
	made.add(&made.entries, l, entryKeys)
	return nil
}

// addProbe adds p to a uprobe_multi link's addresses and cookies, and its
// key to keys.
func addProbe(o *link.UprobeMultiOptions, keys *[]string, p Placement) {
	o.Addresses = append(o.Addresses, p.Offset+uint64(p.Skip))
	o.Cookies = append(o.Cookies, cookie(p))
	*keys = append(*keys, placedKey(p))
}

// attachJVM places the JVM's category probes of one file (mt_jvm_entry,
// entry only) with one uprobe_multi link, if there are any.
func (t *Objects) attachJVM(made *Attachment, ex *link.Executable, pid int, jvm *link.UprobeMultiOptions, keys []string, first allocator.Probe) error {
	if len(jvm.Addresses) == 0 {
		return nil
	}
	l, err := ex.UprobeMulti(nil, t.objs.JvmEntry, jvm)
	if err != nil {
		return attachError("JVM category probes", first, pid, err)
	}
	made.add(&made.entries, l, keys)
	return nil
}

// attachWorkers bounds how many links attachPerProbe creates at once (a
// variable for BenchmarkAttach). Each creation opens a perf event and
// registers a uprobe; concurrently they overlap their waits (docs/kernels.md,
// "Attach and detach on 6.1", has the figures).
var attachWorkers = 8

// attachPerProbe places one file's probes with one classic link per
// function and role: the return probes, then the entry probes.
func (t *Objects) attachPerProbe(made *Attachment, ex *link.Executable, pid int, probes []Placement) error {
	var rets []Placement
	for _, p := range probes {
		if needsReturn(p) {
			rets = append(rets, p)
		}
	}
	for _, role := range []struct {
		kind   string
		probes []Placement
		links  *[]link.Link
		attach func(string, *ebpf.Program, *link.UprobeOptions) (link.Link, error)
		prog   func(Placement) *ebpf.Program
	}{
		{"return probe", rets, &made.returns, ex.Uretprobe, func(Placement) *ebpf.Program { return t.objs.Ret }},
		{"entry probe", probes, &made.entries, ex.Uprobe, t.entryProg},
	} {
		links := make([]link.Link, len(role.probes))
		errs := parallel(len(role.probes), attachWorkers, func(i int) error {
			p := role.probes[i]
			l, err := role.attach("", role.prog(p), &link.UprobeOptions{
				Address: p.Offset + uint64(p.Skip), PID: pid, Cookie: cookie(p)})
			if err != nil {
				return attachError(role.kind+" on "+p.Symbol, p.Probe, pid, err)
			}
			links[i] = l
			return nil
		})
		for i, l := range links {
			if l != nil {
				made.add(role.links, l, []string{placedKey(role.probes[i])})
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// parallel runs fn(0..n-1) on at most workers goroutines and returns the
// errors, in order.
func parallel(n, workers int, fn func(i int) error) []error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
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

// Detach removes pid's probes before it returns: entry probes first, for
// the reason Attach places return probes first, then the rest. Each
// removal waits for the kernel's RCU grace period (about 0.1 s here), so
// they run concurrently; per-probe links still take one grace period
// each, serially (reap.go). Release is quicker where the process is gone
// or memtrace is done.
func (a *Attachment) Detach() error {
	err := errors.Join(closeAll(a.entries), closeAll(a.returns))
	a.entries, a.returns, a.placed, a.keys, a.codeFree = nil, nil, nil, nil, nil
	return err
}

// DetachStale removes, as Detach does, the links that probe a (file,
// offset) pair keep does not list, and keeps the others in place; a
// following Attach with keep adds only what is missing. After a traced
// command's exec, the new program may bind elsewhere (probes left on the
// old allocator would count calls twice), but usually binds to the same
// libc: its probes then stay, and the command is not held while the
// kernel removes and places them again (seconds with per-probe links).
func (a *Attachment) DetachStale(keep []Placement) error {
	want := map[string]bool{}
	for _, p := range keep {
		want[placedKey(p)] = true
	}
	// A link goes if one of its pairs is stale; then so does every other
	// link sharing a pair with it (a file's entry and return links are
	// placed together).
	gone := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, keys := range a.keys {
			stale := false
			for _, k := range keys {
				stale = stale || !want[k] || gone[k]
			}
			for _, k := range keys {
				if stale && !gone[k] {
					gone[k], changed = true, true
				}
			}
		}
	}
	split := func(links []link.Link) (kept, old []link.Link) {
		for _, l := range links {
			if a.isGone(l, gone) {
				old = append(old, l)
			} else {
				kept = append(kept, l)
			}
		}
		return kept, old
	}
	var oldEntries, oldReturns []link.Link
	a.entries, oldEntries = split(a.entries)
	a.returns, oldReturns = split(a.returns)
	for k := range gone {
		delete(a.placed, k)
	}
	for _, l := range append(oldEntries, oldReturns...) {
		delete(a.keys, l)
	}
	return errors.Join(closeAll(oldEntries), closeAll(oldReturns))
}

func (a *Attachment) isGone(l link.Link, gone map[string]bool) bool {
	for _, k := range a.keys[l] {
		if gone[k] {
			return true
		}
	}
	return false
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
