package pprofout

import (
	"fmt"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// movedCode is /bin/cc loaded at a different address in each process (by
// PID): offsets 0x10, 0x20 and 0x30 of its mapping are leaf, mid and main.
type movedCode map[int]uint64

var movedNames = map[uint64]string{0x10: "leaf", 0x20: "mid", 0x30: "main"}

func (c movedCode) Resolve(pid int, ret uint64) symbolize.Frame {
	off := ret - c[pid]
	return symbolize.Frame{Address: ret, CallAddress: ret - 5, Function: movedNames[off], File: "cc.c", Line: int(off), Module: "/bin/cc"}
}

func (c movedCode) MappingOf(pid int, pc uint64) (symbolize.CodeMapping, bool) {
	base, ok := c[pid]
	if !ok || pc < base || pc >= base+0x1000 {
		return symbolize.CodeMapping{}, false
	}
	return symbolize.CodeMapping{Start: base, End: base + 0x1000, Offset: 0x2000, Path: "/bin/cc", BuildID: "cc01"}, true
}

// Stack 1 of every process is leaf called by main.
func (c movedCode) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	if site.StackID != 1 {
		return callstack.Stack{}
	}
	base := c[int(pid)]
	return callstack.Stack{Frames: []symbolize.Frame{c.Resolve(int(pid), base+0x10), c.Resolve(int(pid), base+0x30)}}
}

func ccProcess(pid uint32, base uint64, allocs uint64) aggregate.ProcessSnapshot {
	return aggregate.ProcessSnapshot{PID: pid, Comm: "cc", Sites: []aggregate.SiteSnapshot{
		{Address: base + 0x10, StackID: -1, Stats: aggregate.Stats{Allocs: allocs + 1, AllocBytes: 100 * (allocs + 1), Frees: allocs + 1, FreedBytes: 100 * (allocs + 1)},
			Stacks: []aggregate.StackShare{
				{StackID: 1, Stats: aggregate.Stats{Allocs: allocs, AllocBytes: 100 * allocs, Frees: allocs, FreedBytes: 100 * allocs}},
				{StackID: -1, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 100, LiveAllocs: 1, LiveBytes: 100}},
			}},
		{Address: base + 0x20, StackID: -1, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 7, LiveAllocs: 1, LiveBytes: 7}},
		{Address: base + 0x30, StackID: -1, Category: aggregate.Mapped, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 4096}},
	}}
}

// TestExited: runs of one program loaded at different addresses fold into
// one sample per resolved stack, with their allocations summed, nothing in
// use, no pid and the count of processes folded; locations are offsets in
// a mapping starting at 0; the live processes' samples come first, as
// without Exited; mmap sites stay out.
func TestExited(t *testing.T) {
	code := movedCode{10: 0x1000, 11: 0x7000, 12: 0x9000}
	src := Sources{Symbolizer: code, Mappings: code, Stacks: code}
	x := NewExited(100)
	x.Add(ccProcess(10, 0x1000, 2), src)
	x.Add(ccProcess(11, 0x7000, 3), src)
	delete(code, 10) // gone: what was resolved stays
	delete(code, 11)
	live := aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 12, Comm: "sh",
		Sites: []aggregate.SiteSnapshot{{Address: 0x9020, StackID: -1, Stats: aggregate.Stats{Allocs: 4, AllocBytes: 40, LiveAllocs: 1, LiveBytes: 10}}}}}}
	p := roundTrip(t, Build(live, src, Options{Exited: x}))
	want := []string{
		"[4 40 1 10 0] comm=sh pid=12 mid:32",
		"[5 500 0 0 0] comm=cc exited processes=2 leaf:16/main:48",
		"[2 200 0 0 0] comm=cc exited processes=2 leaf:16",
		"[2 14 0 0 0] comm=cc exited processes=2 mid:32",
	}
	if len(p.Sample) != len(want) {
		t.Fatalf("%d samples, want %d:\n%v", len(p.Sample), len(want), p)
	}
	for i, s := range p.Sample {
		got := fmt.Sprint(s.Value) + " comm=" + s.Label["comm"][0]
		if pid := s.NumLabel["pid"]; len(pid) > 0 {
			got += fmt.Sprintf(" pid=%d", pid[0])
		}
		if s.Label[ExitedLabel] != nil {
			got += fmt.Sprintf(" exited processes=%d", s.NumLabel[ExitedCount][0])
		}
		if got += " " + stackOf(s); got != want[i] {
			t.Errorf("sample %d: %s, want %s", i, got, want[i])
		}
	}
	// leaf's call instruction: offset 0x10-5 of the mapping, file offset 0x200b.
	l := p.Sample[1].Location[0]
	if m := l.Mapping; l.Address != 0xb || m.Start != 0 || m.Limit != 0x1000 || m.Offset != 0x2000 || m.File != "/bin/cc" || m.BuildID != "cc01" || !m.HasFunctions {
		t.Errorf("location %#x, mapping %+v", l.Address, l.Mapping)
	}
	if p.Sample[1].Location[0] != p.Sample[2].Location[0] {
		t.Errorf("leaf has two locations")
	}
	if x.Len() != 3 || len(x.byID) != 3 { // leaf/main, leaf, mid; frames leaf, main, mid
		t.Errorf("%d stacks of %d frames, want 3 of 3", x.Len(), len(x.byID))
	}
}

// TestExitedBound: past its maximum, new stacks of a comm fold into one
// OtherStacks sample.
func TestExitedBound(t *testing.T) {
	code := movedCode{10: 0x1000}
	src := Sources{Symbolizer: code, Mappings: code, Stacks: code}
	x := NewExited(1)
	x.Add(ccProcess(10, 0x1000, 2), src)
	p := Build(aggregate.Snapshot{}, src, Options{Exited: x})
	var got []string
	for _, s := range p.Sample {
		got = append(got, fmt.Sprint(s.Value)+" "+stackOf(s))
	}
	want := fmt.Sprint([]string{"[2 200 0 0 0] leaf:16/main:48", "[2 107 0 0 0] " + OtherStacks + ":0"})
	if fmt.Sprint(got) != want {
		t.Errorf("samples %v, want %v", got, want)
	}
}

// BenchmarkExitedAdd: a short-lived program run again and again, at a new
// load address each time, holds the same stacks: the memory it takes is
// per run only (B/op), what is kept does not grow (stacks reported).
func BenchmarkExitedAdd(b *testing.B) {
	code := movedCode{}
	src := Sources{Symbolizer: code, Mappings: code, Stacks: code}
	x := NewExited(1000)
	b.ReportAllocs()
	for i := range b.N {
		base := uint64(0x10000 + i%4096*0x1000)
		code[i] = base
		x.Add(ccProcess(uint32(i), base, 5), src)
		delete(code, i)
	}
	b.ReportMetric(float64(x.Len()), "stacks")
}
