package python

import (
	"strings"
	"sync"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// Stacks merges the Python frames the probes read with the native stack
// of the same event, as memray's native mode does: each native frame of
// the eval loop (_PyEval_EvalFrameDefault, its .cold part too) gives way
// to the Python frames it ran. An allocation made under Python code by
// the interpreter itself is charged to the innermost Python frame; one a
// C extension made stays charged to its C function, with the Python line
// as its caller. Safe for concurrent use.
type Stacks struct {
	res *symbolize.Resolver

	mu    sync.Mutex
	procs map[uint32]*Layout
	// eval: whether a native address is in the eval loop, per process.
	eval map[uint32]map[uint64]bool
	// unnamed: events whose innermost Python frame could not be named,
	// per process (Forget returns it).
	unnamed map[uint32]uint64
	// freed: code objects freed per process (CodeFreed), in the memo's
	// key: the same words after a free may be another code object's.
	freed map[uint32]uint64

	memoMu sync.Mutex
	memo   *memo
	key    []uint64
}

// NewStacks returns Stacks resolving through res.
func NewStacks(res *symbolize.Resolver) *Stacks {
	return &Stacks{res: res, procs: map[uint32]*Layout{}, eval: map[uint32]map[uint64]bool{},
		unnamed: map[uint32]uint64{}, freed: map[uint32]uint64{}, memo: newMemo()}
}

// Add makes pid's Python frames readable with layout l. keepTags: the
// probes keep each code object's tag until its free, and fold co_name's
// characters into it (l.NameTagged).
func (s *Stacks) Add(pid uint32, l *Layout, keepTags bool) error {
	if err := s.res.AddPython(int(pid), symbolize.PythonLayout{Minor: l.Minor, FirstLine: l.Code.FirstLine,
		Filename: l.Code.Filename, Name: l.Code.Name, Qualname: l.Code.Qualname, Linetable: l.Code.Linetable,
		Adaptive: l.Code.Adaptive, ASCIIData: l.Code.ASCIIData, CompactData: l.Code.CompactData,
		Tagged: l.Tagged(), NameTagged: keepTags && l.NameTagged(), CodeType: l.CodeType}); err != nil {
		return err
	}
	s.mu.Lock()
	s.procs[pid] = l
	s.eval[pid] = map[uint64]bool{}
	s.mu.Unlock()
	return nil
}

// Forget drops pid (gone, or a new program), and returns how many of its
// events kept an innermost Python frame that could not be named: its code
// object could not be read, mostly because the process had exited before
// memtrace read the event (whole host, a reader behind a short-lived
// process). Such an event is charged to the next frame that could be.
func (s *Stacks) Forget(pid uint32) (unnamed uint64) {
	s.mu.Lock()
	_, known := s.procs[pid]
	unnamed = s.unnamed[pid]
	delete(s.procs, pid)
	delete(s.eval, pid)
	delete(s.unnamed, pid)
	delete(s.freed, pid)
	s.mu.Unlock()
	if known {
		// Its pid may come back with other code. Only a Python process's
		// merges are kept: the whole host forgets every exited process,
		// and a Python server's memo outlives the others.
		s.memoMu.Lock()
		s.memo.forget()
		s.memoMu.Unlock()
	}
	s.res.ForgetPython(int(pid))
	return unnamed
}

// noteUnnamed counts an event of pid whose innermost Python frame could
// not be named.
func (s *Stacks) noteUnnamed(pid uint32) {
	s.mu.Lock()
	if _, ok := s.procs[pid]; ok {
		s.unnamed[pid]++
	}
	s.mu.Unlock()
}

// CodeFreed tells that pid freed the code object at code, after every
// event that ran it (bpf/python.h): a code object met there later is
// another, even with the same tag.
func (s *Stacks) CodeFreed(pid uint32, code uint64) {
	s.mu.Lock()
	_, known := s.procs[pid]
	if known {
		s.freed[pid]++
	}
	s.mu.Unlock()
	if known {
		s.res.PythonCodeFreed(int(pid), code)
	}
}

// Batch starts a batch of events (symbolize.Resolver.NextPythonBatch).
func (s *Stacks) Batch() { s.res.NextPythonBatch() }

// codeMask takes a frame's code object address from its first word; its
// tag (symbolize.PythonTag) is in the 16 bits above.
const codeMask = 1<<48 - 1

// group is the Python frames one eval loop call ran, innermost first.
type group []uint64

// Merge returns the charged call site and the stack of an event of pid
// whose native charged call site is callSite and native stack (from the
// charged frame outwards) native, with the Python frames py read by the
// probes: (code object, instruction word) pairs, innermost first. out is
// reused for the stack.
func (s *Stacks) Merge(pid uint32, callSite uint64, native, py []uint64, out []uint64) (uint64, []uint64) {
	s.mu.Lock()
	l, freed := s.procs[pid], s.freed[pid]
	s.mu.Unlock()
	if l == nil || len(py) < 2 {
		return callSite, append(out[:0], native...)
	}
	if out == nil && native == nil {
		// No stack is kept: only the innermost Python frame matters.
		return s.charge(pid, l, callSite, py), out
	}
	// A tagged frame's names never change (symbolize.PythonFrame reads
	// none), so a merge of the same words is the same merge.
	tagged := l.Tagged()
	if tagged {
		s.memoMu.Lock()
		s.key = memoKey(s.key, pid, freed, callSite, native, py)
		charged, stack, ok := s.memo.get(s.key)
		if ok {
			out = append(out[:0], stack...)
		}
		s.memoMu.Unlock()
		if ok {
			return charged, out
		}
	}
	charged, out, whole := s.merge(pid, l, callSite, native, py, out)
	if tagged && whole {
		s.memoMu.Lock()
		s.key = memoKey(s.key, pid, freed, callSite, native, py)
		s.memo.put(s.key, charged, out)
		s.memoMu.Unlock()
	}
	return charged, out
}

// merge is Merge without the memo; whole is false when a Python frame
// could not be named (a read that may succeed later).
func (s *Stacks) merge(pid uint32, l *Layout, callSite uint64, native, py []uint64, out []uint64) (uint64, []uint64, bool) {
	whole := true
	var groups []group
	var cur group
	innermost := true
	for i := 0; i+1 < len(py); i += 2 {
		code, word := py[i], py[i+1]
		e := uint8(word >> 48)
		if l.Shim(e) {
			if len(cur) > 0 {
				groups = append(groups, cur)
				cur = nil
			}
			continue
		}
		addr, ok := s.res.PythonFrame(int(pid), code&codeMask, uint16(code>>48), l.instr(code&codeMask, word))
		if ok {
			cur = append(cur, addr)
		} else {
			whole = false
			if innermost {
				s.noteUnnamed(pid)
			}
		}
		innermost = false
		if l.Minor == 10 || l.Entry(e) {
			groups = append(groups, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	var first uint64
	for _, g := range groups {
		if len(g) > 0 {
			first = g[0]
			break
		}
	}
	if first == 0 {
		return callSite, append(out[:0], native...), whole
	}
	charged := callSite
	if callSite == 0 || l.inText(callSite) {
		charged = first
	}
	out = out[:0]
	g := 0
	for _, pc := range native {
		if g < len(groups) && s.isEval(pid, pc) {
			out = append(out, groups[g]...)
			g++
			continue
		}
		out = append(out, pc)
	}
	for ; g < len(groups); g++ {
		out = append(out, groups[g]...)
	}
	return charged, out, whole
}

// charge is the call site charged for an event whose stack is not kept:
// the innermost Python frame when the interpreter made the allocation.
func (s *Stacks) charge(pid uint32, l *Layout, callSite uint64, py []uint64) uint64 {
	if callSite != 0 && !l.inText(callSite) {
		return callSite
	}
	innermost := true
	for i := 0; i+1 < len(py); i += 2 {
		if l.Shim(uint8(py[i+1] >> 48)) {
			continue
		}
		code := py[i] & codeMask
		if addr, ok := s.res.PythonFrame(int(pid), code, uint16(py[i]>>48), l.instr(code, py[i+1])); ok {
			return addr
		}
		if innermost {
			s.noteUnnamed(pid)
			innermost = false
		}
	}
	return callSite
}

// instr is a frame's instruction offset in code units.
func (l *Layout) instr(code, word uint64) uint32 {
	if l.Minor == 10 {
		return uint32(word) // f_lasti
	}
	ptr := word & (1<<48 - 1)
	base := code + uint64(l.Code.Adaptive)
	if ptr < base {
		return 0
	}
	return uint32((ptr - base) / 2)
}

// inText reports whether pc is in the interpreter's code.
func (l *Layout) inText(pc uint64) bool {
	for _, r := range l.Text {
		if pc > r[0] && pc <= r[1] {
			return true
		}
	}
	return false
}

// isEval reports whether the native frame returning to pc runs the eval loop.
func (s *Stacks) isEval(pid uint32, pc uint64) bool {
	s.mu.Lock()
	m := s.eval[pid]
	v, ok := m[pc&^(1<<63)]
	s.mu.Unlock()
	if ok {
		return v
	}
	f := s.res.Resolve(int(pid), pc&^(1<<63))
	v = strings.HasPrefix(f.Function, "_PyEval_EvalFrameDefault")
	s.mu.Lock()
	if m != nil {
		m[pc&^(1<<63)] = v
	}
	s.mu.Unlock()
	return v
}
