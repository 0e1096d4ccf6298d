package pprofout

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// fakeCode resolves addresses from a table and says every address below
// 0x2000 lies in one mapping of /bin/prog.
type fakeCode map[uint64]symbolize.Frame

func (c fakeCode) Resolve(pid int, ret uint64) symbolize.Frame { return c[ret] }

func (c fakeCode) MappingOf(pid int, pc uint64) (symbolize.CodeMapping, bool) {
	if pc >= 0x2000 {
		return symbolize.CodeMapping{}, false
	}
	return symbolize.CodeMapping{Start: 0x1000, End: 0x2000, Offset: 0x1000, Path: "/bin/prog", BuildID: "abcd"}, true
}

type fakeStacks map[int32][]symbolize.Frame

func (s fakeStacks) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	return callstack.Stack{Frames: s[site.StackID]}
}

var code = fakeCode{
	0x1010: {Address: 0x1010, CallAddress: 0x100b, Function: "leaf", File: "a.c", Line: 3, Module: "/bin/prog"},
	0x1020: {Address: 0x1020, CallAddress: 0x101b, Function: "outer", File: "a.c", Line: 9, Module: "/bin/prog",
		Inlined: []symbolize.InlineFrame{{Function: "helper", File: "h.h", Line: 5}, {Function: "outer", File: "a.c", Line: 9}}},
	0x1030: {Address: 0x1030, CallAddress: 0x102b, Function: "main", File: "a.c", Line: 20, Module: "/bin/prog"},
	0x9000: {Address: 0x9000, CallAddress: 0x8ffb, Module: "/lib/libx.so"},
}

func snapshot() aggregate.Snapshot {
	return aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{
		PID: 7, Comm: "prog",
		Sites: []aggregate.SiteSnapshot{
			{Address: 0x1010, StackID: 1, Stats: aggregate.Stats{Allocs: 3, AllocBytes: 300, LiveAllocs: 1, LiveBytes: 100}},
			{Address: 0x1020, StackID: -1, Stats: aggregate.Stats{Allocs: 2, AllocBytes: 64, Frees: 2, FreedBytes: 64}},
			{Address: 0x9000, StackID: -1, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 8, LiveAllocs: 1, LiveBytes: 8}},
			{Address: 0x1030, StackID: -1, Category: aggregate.Mapped, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 4096, LiveAllocs: 1, LiveBytes: 4096}},
		},
	}}}
}

// TestBuild: one sample per heap site with Go's four values; inline
// chains become lines innermost first; --detail stacks become locations;
// a frame without a symbol keeps its address and module; mmap sites are
// not heap and are left out. The profile survives a write and a parse.
func TestBuild(t *testing.T) {
	p := roundTrip(t, Build(snapshot(), Sources{Symbolizer: code, Mappings: code, Stacks: fakeStacks{1: {code[0x1010], code[0x1030]}}}, Options{}))
	type sample struct {
		values [4]int64
		stack  string // lines, innermost first, "/" between locations
		module string
	}
	want := []sample{
		{[4]int64{3, 300, 1, 100}, "leaf:3/main:20", "/bin/prog"},
		{[4]int64{1, 8, 1, 8}, "@0x8ffb", "/lib/libx.so"},
		{[4]int64{2, 64, 0, 0}, "helper:5,outer:9", "/bin/prog"},
	}
	if len(p.Sample) != len(want) {
		t.Fatalf("%d samples, want %d:\n%v", len(p.Sample), len(want), p)
	}
	for i, s := range p.Sample {
		got := sample{stack: stackOf(s)}
		copy(got.values[:], s.Value)
		got.module = s.Location[0].Mapping.File
		if got != want[i] {
			t.Errorf("sample %d: %+v, want %+v", i, got, want[i])
		}
		if s.Label["comm"][0] != "prog" || s.NumLabel["pid"][0] != 7 {
			t.Errorf("sample %d labels %v %v", i, s.Label, s.NumLabel)
		}
	}
	m := p.Sample[0].Location[0].Mapping
	if m.Start != 0x1000 || m.Limit != 0x2000 || m.Offset != 0x1000 || m.BuildID != "abcd" || !m.HasFunctions {
		t.Errorf("mapping %+v", m)
	}
	if got := UnknownName(p.Sample[1].Location[0]); got != "libx.so+0x8ffb" {
		t.Errorf("UnknownName = %q", got)
	}
}

// TestSampled: sampled snapshots say so, with the mean as the period.
func TestSampled(t *testing.T) {
	s := snapshot()
	s.SampleBytes = 65536
	p := Build(s, Sources{}, Options{})
	if p.Period != 65536 || len(p.Comments) != 2 {
		t.Errorf("period %d, comments %q", p.Period, p.Comments)
	}
}

// roundTrip writes p and parses it back.
func roundTrip(t *testing.T, p *profile.Profile) *profile.Profile {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stackOf writes a sample's lines, innermost first, "/" between locations.
func stackOf(s *profile.Sample) string {
	out := ""
	for j, l := range s.Location {
		if j > 0 {
			out += "/"
		}
		if len(l.Line) == 0 {
			out += "@0x" + strconv.FormatUint(l.Address, 16)
		}
		for k, ln := range l.Line {
			if k > 0 {
				out += ","
			}
			out += ln.Function.Name + ":" + strconv.FormatInt(ln.Line, 10)
		}
	}
	return out
}

// TestStackBreakdown: a site broken down by stack (sampled mode) gives one
// sample per stack, with the stack's figures; a share without a stack
// has the call site alone; a share with nothing is left out.
func TestStackBreakdown(t *testing.T) {
	snap := aggregate.Snapshot{SampleBytes: 4096, Processes: []aggregate.ProcessSnapshot{{
		PID: 7, Comm: "prog",
		Sites: []aggregate.SiteSnapshot{{Address: 0x1010, StackID: -1,
			Stats: aggregate.Stats{Allocs: 5, AllocBytes: 500, Frees: 1, FreedBytes: 100, LiveAllocs: 4, LiveBytes: 400},
			Stacks: []aggregate.StackShare{
				{StackID: 2, Stats: aggregate.Stats{Allocs: 3, AllocBytes: 300, LiveAllocs: 3, LiveBytes: 300}},
				{StackID: -1, Stats: aggregate.Stats{Allocs: 2, AllocBytes: 200, Frees: 1, FreedBytes: 100, LiveAllocs: 1, LiveBytes: 100}},
				{StackID: 3},
			}}},
	}}}
	p := Build(snap, Sources{Symbolizer: code, Mappings: code, Stacks: fakeStacks{2: {code[0x1010], code[0x1020], code[0x1030]}}}, Options{})
	want := []string{
		"[3 300 3 300 0] leaf:3/helper:5,outer:9/main:20",
		"[2 200 1 100 0] leaf:3",
	}
	if len(p.Sample) != len(want) {
		t.Fatalf("%d samples, want %d:\n%v", len(p.Sample), len(want), p)
	}
	for i, s := range p.Sample {
		if got := fmt.Sprint(s.Value) + " " + stackOf(s); got != want[i] {
			t.Errorf("sample %d: %s, want %s", i, got, want[i])
		}
	}
}

// TestResidentSamples: resident sites are samples of their own, valued
// under resident_space only.
func TestResidentSamples(t *testing.T) {
	snap := aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 7, Comm: "go",
		Sites: []aggregate.SiteSnapshot{{Address: 0x10, StackID: -1, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 8, LiveAllocs: 1, LiveBytes: 8}}},
		Resident: &aggregate.ResidentSnapshot{SampleBytes: 65536, Pages: 3, Bytes: 3 << 20, Sites: []aggregate.ResidentSite{
			{Address: 0x20, StackID: -1, Pages: 2, Bytes: 2 << 20}, {Address: 0x30, StackID: -1, Pages: 1, Bytes: 1 << 20}}},
	}}}
	p := roundTrip(t, Build(snap, Sources{}, Options{}))
	if got := p.SampleType[ResidentSpace]; got.Type != "resident_space" || got.Unit != "bytes" {
		t.Errorf("sample type %d: %v, want resident_space bytes", ResidentSpace, got)
	}
	want := []string{"[1 8 1 8 0] @0xf", "[0 0 0 0 2097152] @0x1f", "[0 0 0 0 1048576] @0x2f"} // call addresses: return addresses - 1
	if len(p.Sample) != len(want) {
		t.Fatalf("%d samples, want %d:\n%v", len(p.Sample), len(want), p)
	}
	for i, s := range p.Sample {
		if got := fmt.Sprint(s.Value) + " " + stackOf(s); got != want[i] {
			t.Errorf("sample %d: %s, want %s", i, got, want[i])
		}
	}
}
