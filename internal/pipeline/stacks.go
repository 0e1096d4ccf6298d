package pipeline

import (
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// StackStore holds the raw stacks by id, as inputs of the run: a live
// run learns each from the tracer when an event first names it (Learn),
// a replay from the recording's stack records. The reports, exports and
// leak checks read them here, never from the tracer. A complete stack
// (the unwind reached the thread's first function) ends with a 0 frame,
// as the recording keeps it.
type StackStore struct {
	frames map[int32][]uint64
	// byPID: each process's stacks (ids are a process's own), so that a
	// whole-host run can drop those of processes gone.
	byPID map[uint32][]int32
}

func NewStackStore() *StackStore {
	return &StackStore{frames: map[int32][]uint64{}, byPID: map[uint32][]int32{}}
}

// Add keeps pid's stack id; frames is copied.
func (st *StackStore) Add(pid uint32, id int32, frames []uint64) {
	if _, ok := st.frames[id]; ok {
		return
	}
	st.frames[id] = append([]uint64(nil), frames...)
	st.byPID[pid] = append(st.byPID[pid], id)
}

// Learn adds the stack an event names, if new: get reads it from where
// the source has it.
func (st *StackStore) Learn(pid uint32, id int32, get func(int32) ([]uint64, bool)) {
	if id < 0 {
		return
	}
	if _, ok := st.frames[id]; ok {
		return
	}
	frames, complete := get(id)
	if complete {
		// A 0 frame (never a return address) ends a complete stack.
		frames = append(frames[:len(frames):len(frames)], 0)
	}
	st.Add(pid, id, frames)
}

// Get returns stack id's frames as kept (a complete one ends with 0).
func (st *StackStore) Get(id int32) []uint64 { return st.frames[id] }

// Forget drops pid's stacks.
func (st *StackStore) Forget(pid uint32) {
	for _, id := range st.byPID[pid] {
		delete(st.frames, id)
	}
	delete(st.byPID, pid)
}

// StackSource gives the report each --detail site's checked stack: the
// raw frames from the store, composed and checked by callstack.
type StackSource struct {
	Store *StackStore
	Code  CodeView
	Depth int
}

func (s StackSource) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	frames := s.Store.Get(site.StackID)
	complete := len(frames) > 0 && frames[len(frames)-1] == 0
	if complete {
		frames = frames[:len(frames)-1]
	}
	if len(frames) == 0 {
		frames = []uint64{site.Address}
	}
	return callstack.Build(s.Code, int(pid), frames, complete, s.Depth)
}

// CodeView adapts symbolize.Resolver to callstack.Code.
type CodeView struct{ *symbolize.Resolver }

func (c CodeView) Read(pid int, addr uint64, n int) ([]byte, bool) {
	return c.CodeBefore(pid, addr, n)
}
