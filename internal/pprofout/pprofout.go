// Package pprofout turns a snapshot of the aggregate into a pprof profile
// (profile.proto, gzipped), the format go tool pprof, Pyroscope, Parca,
// Grafana and speedscope read. The sample types are Go's heap profile's,
// so tools that know Go heap profiles show memtrace's the same way.
package pprofout

import (
	"cmp"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// The sample values, in this order, as Go's heap profiles have them.
const (
	AllocObjects = iota // allocations made (count)
	AllocSpace          // bytes allocated (bytes)
	InuseObjects        // live blocks (count)
	InuseSpace          // live bytes (bytes)
	// ResidentSpace: resident anonymous memory by who made it resident
	// (sampled page faults; estimates), in samples of their own.
	ResidentSpace
)

// MappingSource says which executable mapping holds a code address
// (symbolize.Resolver is one).
type MappingSource interface {
	MappingOf(pid int, pc uint64) (symbolize.CodeMapping, bool)
}

// Sources resolve what a snapshot holds as addresses. Any may be nil:
// without a Symbolizer locations carry addresses only; without Stacks each
// sample has one frame, the call site charged; without Mappings a mapping
// is named by its module's path alone.
type Sources struct {
	Symbolizer report.Symbolizer
	Stacks     report.StackSource
	Mappings   MappingSource
}

// Options set what the snapshot does not hold.
type Options struct {
	// Time is when the snapshot was taken (the profile's time_nanos).
	Time time.Time
	// Duration is how long the trace ran until then.
	Duration time.Duration
	// Exited, when not nil, adds the processes that exited during the run
	// (whole-host mode): their allocations, none in use.
	Exited *Exited
}

// Write writes the profile of snap's heap call sites to w, gzipped.
func Write(w io.Writer, snap aggregate.Snapshot, src Sources, o Options) error {
	if err := Build(snap, src, o).Write(w); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

// Build returns the profile of snap's heap call sites (anonymous mappings
// made with mmap are not heap blocks and are left out). Each sample is one
// call site of one process, or one stack of a call site that has a stack
// breakdown (SiteSnapshot.Stacks), labelled with "pid" (numeric) and
// "comm"; then, with Options.Exited, one sample per comm and stack of the
// processes that exited, labelled "comm", "exited" and "processes". In
// sampled mode the values are the snapshot's estimates and Period is the
// sampling mean in bytes.
func Build(snap aggregate.Snapshot, src Sources, o Options) *profile.Profile {
	b := &builder{
		p: &profile.Profile{
			SampleType: []*profile.ValueType{
				{Type: "alloc_objects", Unit: "count"},
				{Type: "alloc_space", Unit: "bytes"},
				{Type: "inuse_objects", Unit: "count"},
				{Type: "inuse_space", Unit: "bytes"},
				{Type: "resident_space", Unit: "bytes"},
			},
			DefaultSampleType: "inuse_space",
			PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
			Period:            int64(snap.SampleBytes),
			TimeNanos:         o.Time.UnixNano(),
			DurationNanos:     o.Duration.Nanoseconds(),
			Comments:          []string{"memtrace: native heap (malloc and friends) by call site"},
		},
		src:       src,
		locations: map[locKey]*profile.Location{},
		functions: map[funcKey]*profile.Function{},
		mappings:  map[mapKey]*profile.Mapping{},
	}
	if snap.SampleBytes > 0 {
		b.p.Comments = append(b.p.Comments, "sampled: values are estimates, one sample per "+strconv.FormatUint(snap.SampleBytes, 10)+" bytes on average")
	}
	for _, ps := range snap.Processes {
		sites := slices.Clone(ps.Sites)
		slices.SortFunc(sites, func(a, c aggregate.SiteSnapshot) int {
			if r := cmp.Compare(c.LiveBytes, a.LiveBytes); r != 0 {
				return r
			}
			if r := cmp.Compare(c.AllocBytes, a.AllocBytes); r != 0 {
				return r
			}
			if r := cmp.Compare(a.Address, c.Address); r != 0 {
				return r
			}
			return cmp.Compare(a.StackID, c.StackID)
		})
		for _, site := range sites {
			if site.Category != aggregate.Heap {
				continue
			}
			// Sampled mode: one sample per stack of the site.
			for _, s := range site.ByStack() {
				if s.Allocs != 0 || s.LiveAllocs != 0 {
					b.addSample(ps, s)
				}
			}
		}
	}
	for _, ps := range snap.Processes {
		if ps.Resident != nil {
			for _, r := range ps.Resident.Sites {
				b.addResident(ps, r)
			}
		}
	}
	if o.Exited != nil {
		for _, e := range o.Exited.sorted() {
			b.addExited(e, o.Exited.procs[e.comm])
		}
	}
	return b.p
}

// locKey names a location by process and address, or by the key of an
// exited process's frame.
type locKey struct {
	pid    uint32
	addr   uint64
	exited string
}

type funcKey struct{ name, file string }

// mapKey names a mapping by process and start, or by process and module
// path when the mapping is not known.
type mapKey struct {
	pid    uint32
	start  uint64
	module string
	exited bool // start is the file offset, of an exited process's mapping
}

type builder struct {
	p         *profile.Profile
	src       Sources
	locations map[locKey]*profile.Location
	functions map[funcKey]*profile.Function
	mappings  map[mapKey]*profile.Mapping
}

func (b *builder) addSample(ps aggregate.ProcessSnapshot, s aggregate.SiteSnapshot) {
	sm := &profile.Sample{
		Value:    []int64{int64(s.Allocs), int64(s.AllocBytes), int64(s.LiveAllocs), int64(s.LiveBytes), 0},
		Label:    map[string][]string{"comm": {ps.Comm}},
		NumLabel: map[string][]int64{"pid": {int64(ps.PID)}},
	}
	for _, f := range resolveFrames(b.src, ps.PID, s) {
		sm.Location = append(sm.Location, b.location(ps.PID, f))
	}
	b.p.Sample = append(b.p.Sample, sm)
}

// addResident adds the sample of one resident site: its estimated
// resident bytes, nothing allocated or in use on the heap.
func (b *builder) addResident(ps aggregate.ProcessSnapshot, r aggregate.ResidentSite) {
	sm := &profile.Sample{
		Value:    []int64{0, 0, 0, 0, int64(r.Bytes)},
		Label:    map[string][]string{"comm": {ps.Comm}},
		NumLabel: map[string][]int64{"pid": {int64(ps.PID)}},
	}
	for _, f := range resolveFrames(b.src, ps.PID, aggregate.SiteSnapshot{Address: r.Address, StackID: r.StackID}) {
		sm.Location = append(sm.Location, b.location(ps.PID, f))
	}
	b.p.Sample = append(b.p.Sample, sm)
}

// addExited adds the sample of one stack of exited processes: no pid (n
// processes of its comm were folded), nothing in use.
func (b *builder) addExited(e *exitedStack, n int64) {
	sm := &profile.Sample{
		Value:    []int64{e.allocs, e.allocByte, 0, 0, 0},
		Label:    map[string][]string{"comm": {e.comm}, ExitedLabel: {"true"}},
		NumLabel: map[string][]int64{ExitedCount: {n}},
	}
	for _, f := range e.frames {
		sm.Location = append(sm.Location, b.exitedLocation(f))
	}
	b.p.Sample = append(b.p.Sample, sm)
}

// resolveFrames returns the site's stack, innermost first: the checked
// stack with --detail or sampled mode's breakdown, else the call site
// alone.
func resolveFrames(src Sources, pid uint32, s aggregate.SiteSnapshot) []symbolize.Frame {
	if src.Stacks != nil && s.StackID >= 0 {
		if st := src.Stacks.Stack(pid, s); len(st.Frames) > 0 {
			return st.Frames
		}
	}
	f := symbolize.Frame{Address: s.Address}
	if src.Symbolizer != nil {
		f = src.Symbolizer.Resolve(int(pid), s.Address)
		if f.Address == 0 {
			f.Address = s.Address
		}
	}
	return []symbolize.Frame{f}
}

// callAddress is the call instruction's address: what a profiler's pc for
// a caller frame stands for.
func callAddress(f symbolize.Frame) uint64 {
	if f.CallAddress == 0 && f.Address > 0 {
		return f.Address - 1
	}
	return f.CallAddress
}

func (b *builder) location(pid uint32, f symbolize.Frame) *profile.Location {
	k := locKey{pid: pid, addr: f.Address}
	if l := b.locations[k]; l != nil {
		return l
	}
	addr := callAddress(f)
	return b.newLocation(k, f, addr, b.mapping(pid, f, addr))
}

// exitedLocation is the location of a frame of exited processes. Their
// mappings are gone and differ run by run (ASLR): each file's executable
// mapping is given start 0, so an address is its offset from the
// mapping's start in every run.
func (b *builder) exitedLocation(e *exitedFrame) *profile.Location {
	k := locKey{exited: e.key}
	if l := b.locations[k]; l != nil {
		return l
	}
	addr := callAddress(e.f)
	var m *profile.Mapping
	switch {
	case e.mapped:
		addr -= e.m.Start
		mk := mapKey{start: e.m.Offset, module: e.m.Path, exited: true}
		if m = b.mappings[mk]; m == nil {
			m = b.newMapping(mk, symbolize.CodeMapping{Start: 0, End: e.m.End - e.m.Start,
				Offset: e.m.Offset, Path: e.m.Path, BuildID: e.m.BuildID})
		}
	case e.f.Module != "":
		mk := mapKey{module: e.f.Module, exited: true}
		if m = b.mappings[mk]; m == nil {
			m = b.newMapping(mk, symbolize.CodeMapping{Path: e.f.Module})
		}
	}
	return b.newLocation(k, e.f, addr, m)
}

func (b *builder) newLocation(k locKey, f symbolize.Frame, addr uint64, m *profile.Mapping) *profile.Location {
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Address: addr, Mapping: m}
	if len(f.Inlined) > 0 {
		// Innermost first, the function it was inlined into last: the
		// order profile.proto wants.
		for _, in := range f.Inlined {
			l.Line = append(l.Line, profile.Line{Function: b.function(in.Function, in.File), Line: int64(in.Line)})
		}
	} else if f.Function != "" {
		l.Line = []profile.Line{{Function: b.function(f.Function, f.File), Line: int64(f.Line)}}
	}
	if len(l.Line) > 0 && l.Mapping != nil {
		// pprof must not try to symbolize what is resolved already.
		l.Mapping.HasFunctions = true
		l.Mapping.HasInlineFrames = true
		if f.File != "" {
			l.Mapping.HasFilenames = true
			l.Mapping.HasLineNumbers = true
		}
	}
	b.locations[k] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

func (b *builder) function(name, file string) *profile.Function {
	k := funcKey{name, file}
	if fn := b.functions[k]; fn != nil {
		return fn
	}
	fn := &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: name, Filename: file}
	b.functions[k] = fn
	b.p.Function = append(b.p.Function, fn)
	return fn
}

// mapping returns the mapping of a frame, nil when its module is unknown.
func (b *builder) mapping(pid uint32, f symbolize.Frame, pc uint64) *profile.Mapping {
	var cm symbolize.CodeMapping
	ok := false
	if b.src.Mappings != nil {
		cm, ok = b.src.Mappings.MappingOf(int(pid), pc)
	}
	k := mapKey{pid: pid, start: cm.Start}
	if !ok {
		if f.Module == "" {
			return nil
		}
		cm = symbolize.CodeMapping{Path: f.Module}
		k = mapKey{pid: pid, module: f.Module}
	}
	if m := b.mappings[k]; m != nil {
		return m
	}
	return b.newMapping(k, cm)
}

func (b *builder) newMapping(k mapKey, cm symbolize.CodeMapping) *profile.Mapping {
	m := &profile.Mapping{ID: uint64(len(b.p.Mapping) + 1), Start: cm.Start, Limit: cm.End,
		Offset: cm.Offset, File: cm.Path, BuildID: cm.BuildID}
	b.mappings[k] = m
	b.p.Mapping = append(b.p.Mapping, m)
	return m
}

// UnknownName names a location without a function: its module's base name
// and the address's offset in the mapped file, which addr2line accepts.
func UnknownName(l *profile.Location) string {
	if l.Mapping == nil || l.Mapping.File == "" {
		return "0x" + strconv.FormatUint(l.Address, 16)
	}
	m := l.Mapping
	off := l.Address
	if l.Address >= m.Start && m.Limit > m.Start {
		off = l.Address - m.Start + m.Offset
	}
	return path.Base(m.File) + "+0x" + strconv.FormatUint(off, 16)
}
