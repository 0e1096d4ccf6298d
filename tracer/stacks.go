package tracer

import (
	"sync"
	"unsafe"
)

// stackStore numbers the distinct stacks the probes unwound, so that a
// call site of --detail is (call site, stack id) as before, and the report
// can ask for a stack's frames later.
type stackStore struct {
	mu     sync.Mutex
	ids    map[string]int32
	stacks []storedStack
	buf    []byte // the key being looked up, reused
}

type storedStack struct {
	frames   []uint64
	complete bool
}

// intern returns the id of the stack, adding it if new. frames is copied.
func (s *stackStore) intern(frames []uint64, complete bool) int32 {
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
		s.ids = map[string]int32{}
	}
	s.buf = append(append(s.buf[:0], key...), c)
	// The lookup converts without allocating; only a new stack is copied.
	if id, ok := s.ids[string(s.buf)]; ok {
		return id
	}
	id := int32(len(s.stacks))
	s.stacks = append(s.stacks, storedStack{frames: append([]uint64(nil), frames...), complete: complete})
	s.ids[string(s.buf)] = id
	return id
}

// Stack returns the frames of an unwound stack, the charged call site
// first, and whether the unwind reached the thread's outermost frame.
func (t *Objects) Stack(id int32) ([]uint64, bool) {
	t.stacks.mu.Lock()
	defer t.stacks.mu.Unlock()
	if id < 0 || int(id) >= len(t.stacks.stacks) {
		return nil, false
	}
	st := t.stacks.stacks[id]
	return st.frames, st.complete
}
