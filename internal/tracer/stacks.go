package tracer

import (
	"encoding/binary"
	"sync"
	"unsafe"
)

// stackStore numbers the distinct stacks the probes unwound, so that a
// call site of --detail is (call site, stack id) as before, and the report
// can ask for a stack's frames later. Stacks belong to a process (its
// addresses mean nothing in another), so that a whole-host run, which
// takes the stacks of its samples, can drop those of processes gone
// (ForgetStacks). Ids are never reused: a recording or a cache that saw
// an id still means the same stack by it.
type stackStore struct {
	mu     sync.Mutex
	ids    map[string]int32
	stacks map[int32]storedStack
	byPID  map[uint32][]int32
	next   int32
	buf    []byte // the key being looked up, reused
}

type storedStack struct {
	frames   []uint64
	complete bool
	key      string
}

// intern returns the id of pid's stack, adding it if new. frames is copied.
func (s *stackStore) intern(pid uint32, frames []uint64, complete bool) int32 {
	if len(frames) == 0 {
		return -1
	}
	key := unsafe.Slice((*byte)(unsafe.Pointer(&frames[0])), len(frames)*8)
	c := byte(0)
	if complete {
		c = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids, s.stacks, s.byPID = map[string]int32{}, map[int32]storedStack{}, map[uint32][]int32{}
	}
	s.buf = append(binary.NativeEndian.AppendUint32(s.buf[:0], pid), c)
	s.buf = append(s.buf, key...)
	// The lookup converts without allocating; only a new stack is copied.
	if id, ok := s.ids[string(s.buf)]; ok {
		return id
	}
	id := s.next
	s.next++
	k := string(s.buf)
	s.stacks[id] = storedStack{frames: append([]uint64(nil), frames...), complete: complete, key: k}
	s.ids[k] = id
	s.byPID[pid] = append(s.byPID[pid], id)
	return id
}

// forget drops pid's stacks.
func (s *stackStore) forget(pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.byPID[pid] {
		delete(s.ids, s.stacks[id].key)
		delete(s.stacks, id)
	}
	delete(s.byPID, pid)
}

// Stack returns the frames of an unwound stack, the charged call site
// first, and whether the unwind reached the thread's outermost frame. A
// stack whose process was forgotten has none.
func (t *Objects) Stack(id int32) ([]uint64, bool) {
	t.stacks.mu.Lock()
	defer t.stacks.mu.Unlock()
	st, ok := t.stacks.stacks[id]
	if !ok {
		return nil, false
	}
	return st.frames, st.complete
}

// ForgetStacks drops the stacks of pid, once nothing will report them:
// whole-host mode calls it when a process's final records are written
// or its program is replaced (exec).
func (t *Objects) ForgetStacks(pid uint32) { t.stacks.forget(pid) }
