package pprofout

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// ExitedLabel is the string label of the samples of exited processes
// ("true"); they carry no "pid", being the sum of every process of one
// comm that exited, and a numeric label ExitedCount.
const (
	ExitedLabel = "exited"
	ExitedCount = "processes"
)

// OtherStacks names the one frame of the stacks an Exited folds together
// once it holds its maximum of distinct stacks.
const OtherStacks = "[other stacks]"

// Exited folds the heap allocations of processes that exited (whole-host
// mode forgets them) by comm and resolved stack, so that repeated runs of
// one program merge and the memory held stays bounded however long the
// run: distinct frames are kept once, a stack is a list of them. Stacks
// are resolved when the process is added, while its mappings are known.
// Not safe for concurrent use.
type Exited struct {
	max    int
	stacks map[string]*exitedStack // by comm and frame IDs
	frames map[string]int          // frame IDs by the frames' keys
	byID   []*exitedFrame
	procs  map[string]int64 // processes added, by comm
}

type exitedStack struct {
	comm              string
	key               string
	frames            []*exitedFrame
	allocs, allocByte int64
}

// exitedFrame is a frame resolved while its process lived: the frame and
// the executable mapping holding its call instruction.
type exitedFrame struct {
	f      symbolize.Frame
	m      symbolize.CodeMapping
	mapped bool
	key    string // the frame's identity across processes (not its address: ASLR)
}

// NewExited returns an empty Exited holding at most max distinct stacks
// (and, per comm, one OtherStacks).
func NewExited(max int) *Exited {
	return &Exited{max: max, stacks: map[string]*exitedStack{}, frames: map[string]int{}, procs: map[string]int64{}}
}

// Add folds the heap sites of p, a process's final snapshot, resolving
// their stacks with src now.
func (x *Exited) Add(p aggregate.ProcessSnapshot, src Sources) {
	x.procs[p.Comm]++
	for _, site := range p.Sites {
		if site.Category != aggregate.Heap {
			continue
		}
		for _, s := range site.ByStack() {
			if s.Allocs == 0 {
				continue
			}
			e := x.stack(p.Comm, resolveExited(p.PID, s, src))
			e.allocs += int64(s.Allocs)
			e.allocByte += int64(s.AllocBytes)
		}
	}
}

// stack returns the stack of comm with frames, added if new and there is
// room, else the comm's OtherStacks.
func (x *Exited) stack(comm string, frames []exitedFrame) *exitedStack {
	key, known := x.stackKey(comm, frames)
	if e := x.stacks[key]; known && e != nil {
		return e
	}
	if len(x.stacks) >= x.max {
		frames = []exitedFrame{{f: symbolize.Frame{Function: OtherStacks}, key: OtherStacks}}
		key, known = x.stackKey(comm, frames)
		if e := x.stacks[key]; known && e != nil {
			return e
		}
	}
	e := &exitedStack{comm: comm}
	for _, f := range frames {
		id, ok := x.frames[f.key]
		if !ok {
			id = len(x.byID)
			x.frames[f.key] = id
			x.byID = append(x.byID, &f)
		}
		e.frames = append(e.frames, x.byID[id])
	}
	e.key, _ = x.stackKey(comm, frames)
	x.stacks[e.key] = e
	return e
}

// stackKey is comm and the IDs of frames; known says all had one.
func (x *Exited) stackKey(comm string, frames []exitedFrame) (string, bool) {
	b := []byte(comm)
	for _, f := range frames {
		id, ok := x.frames[f.key]
		if !ok {
			return "", false
		}
		b = binary.LittleEndian.AppendUint32(append(b, 0), uint32(id))
	}
	return string(b), true
}

// resolveExited resolves the stack of s, a site of process pid, and keys
// its frames by what is the same in every run of a program.
func resolveExited(pid uint32, s aggregate.SiteSnapshot, src Sources) []exitedFrame {
	fs := resolveFrames(src, pid, s)
	out := make([]exitedFrame, len(fs))
	for i, f := range fs {
		e := exitedFrame{f: f}
		pc := callAddress(f)
		if src.Mappings != nil {
			e.m, e.mapped = src.Mappings.MappingOf(int(pid), pc)
		}
		switch {
		case e.mapped: // the file and the offset in it
			e.key = e.m.Path + "@" + strconv.FormatUint(pc-e.m.Start+e.m.Offset, 16)
		case f.Function != "":
			e.key = f.Module + ":" + f.Function + ":" + f.File + ":" + strconv.Itoa(f.Line)
		default:
			e.key = f.Module + "@" + strconv.FormatUint(pc, 16)
		}
		out[i] = e
	}
	return out
}

// Len is the number of distinct stacks held.
func (x *Exited) Len() int { return len(x.stacks) }

// sorted returns the stacks by comm, then most bytes allocated first.
func (x *Exited) sorted() []*exitedStack {
	out := make([]*exitedStack, 0, len(x.stacks))
	for _, e := range x.stacks {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *exitedStack) int {
		if r := cmp.Compare(a.comm, b.comm); r != 0 {
			return r
		}
		if r := cmp.Compare(b.allocByte, a.allocByte); r != 0 {
			return r
		}
		return cmp.Compare(a.key, b.key)
	})
	return out
}
