package pprofout

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/symbolize"
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
// run. Stacks are resolved when the process is added, while its mappings
// are known. Not safe for concurrent use.
type Exited struct {
	max    int
	stacks map[string]*exitedStack // by comm and the stack's key
	procs  map[string]int64        // processes added, by comm
}

type exitedStack struct {
	comm              string
	key               string
	frames            []exitedFrame
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
// (per comm, one more: OtherStacks).
func NewExited(max int) *Exited {
	return &Exited{max: max, stacks: map[string]*exitedStack{}, procs: map[string]int64{}}
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
			frames := x.resolve(p.PID, s, src)
			var b strings.Builder
			b.WriteString(p.Comm)
			for _, f := range frames {
				b.WriteByte(0)
				b.WriteString(f.key)
			}
			k := b.String()
			e := x.stacks[k]
			if e == nil {
				if len(x.stacks) >= x.max {
					k = p.Comm + "\x00\x00" + OtherStacks
					e = x.stacks[k]
					frames = []exitedFrame{{f: symbolize.Frame{Function: OtherStacks}, key: OtherStacks}}
				}
				if e == nil {
					e = &exitedStack{comm: p.Comm, key: k, frames: frames}
					x.stacks[k] = e
				}
			}
			e.allocs += int64(s.Allocs)
			e.allocByte += int64(s.AllocBytes)
		}
	}
}

func (x *Exited) resolve(pid uint32, s aggregate.SiteSnapshot, src Sources) []exitedFrame {
	fs := resolveFrames(src, pid, s)
	out := make([]exitedFrame, len(fs))
	for i, f := range fs {
		e := exitedFrame{f: f}
		pc := callAddress(f)
		if src.Mappings != nil {
			e.m, e.mapped = src.Mappings.MappingOf(int(pid), pc)
		}
		switch {
		case e.mapped: // the file and the offset in it: the same in every run
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
