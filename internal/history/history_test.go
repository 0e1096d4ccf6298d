package history

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

func snap(live, peak uint64) aggregate.Snapshot {
	return aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 1, Comm: "p",
		Heap:          aggregate.Stats{LiveBytes: live},
		PeakLiveBytes: peak,
		Sites:         []aggregate.SiteSnapshot{{Address: 1, StackID: -1, Stats: aggregate.Stats{LiveBytes: live}}}}}}
}

// TestDownsample: a full timeline halves, keeping the higher neighbour,
// so a one-sample peak survives; the peak's time is that sample's.
func TestDownsample(t *testing.T) {
	c := New(Options{MaxSamples: 8})
	for i := uint64(0); i < 40; i++ {
		live := i
		peak := max(i, 1000)
		if i < 21 {
			peak = i
		}
		if i == 21 {
			live = 1000
		}
		c.Sample(i*10, snap(live, peak), nil)
	}
	p := c.History().Processes[0]
	if len(p.Samples) > 8 {
		t.Errorf("%d samples, want at most 8", len(p.Samples))
	}
	var most uint64
	for _, s := range p.Samples {
		most = max(most, s.LiveBytes)
	}
	if most != 1000 || p.Peak != (Peak{Time: 210, Bytes: 1000}) {
		t.Errorf("max %d, peak %+v; want 1000 at 210", most, p.Peak)
	}
	if last := p.Samples[len(p.Samples)-1]; last.Time != 390 {
		t.Errorf("last sample at %d, want 390 (the end)", last.Time)
	}
}

// TestCoarsen: cells go to the site with most bytes in them; cells grow
// until the runs fit.
func TestCoarsen(t *testing.T) {
	bs := []block{{0, 100, 0}, {112, 200, 0}, {208, 220, 1}, {224, 240, 1}, {300, 400, 2}, {10000, 10100, 2}}
	tests := []struct {
		limit   int
		want    []Run
		granule uint64
	}{
		{10, []Run{{0, 208, 0}, {208, 240, 1}, {288, 400, 2}, {10000, 10112, 2}}, 16},
		{3, []Run{{0, 256, 0}, {256, 512, 2}, {9984, 10112, 2}}, 128},
	}
	for _, tt := range tests {
		got, g := coarsen(bs, tt.limit, 1024) // from a coarser granule: it halves
		if g != tt.granule || len(got) != len(tt.want) {
			t.Errorf("limit %d: %v (granule %d), want %v (%d)", tt.limit, got, g, tt.want, tt.granule)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("limit %d: %v, want %v", tt.limit, got, tt.want)
				break
			}
		}
	}
}

type oneBlock struct{}

func (oneBlock) ForEachLiveSite(pid uint32, fn func(addr, size uint64, site aggregate.SiteKey) bool) {
	fn(0x1000, 24, aggregate.SiteKey{Address: 1, StackID: -1})
}

// TestMaps: heap-map moments every MapEvery, thinned and spaced out when
// full; sizes histogrammed by powers of two.
func TestMaps(t *testing.T) {
	c := New(Options{MapEvery: 100, MaxMaps: 4})
	c.Observe(&event.Event{Kind: event.Alloc, PID: 1, Size: 24})
	c.Observe(&event.Event{Kind: event.Realloc, PID: 1, Addr: 8, Size: 1})
	c.Observe(&event.Event{Kind: event.Realloc, PID: 1, Addr: 0, Size: 100}) // failed: no block
	for now := uint64(0); now <= 1000; now += 50 {
		c.Sample(now, snap(24, 24), oneBlock{})
	}
	p := c.History().Processes[0]
	var times []uint64
	for _, m := range p.Maps {
		times = append(times, m.Time)
	}
	if len(times) > 4 || times[0] != 0 {
		t.Errorf("map times %v", times)
	}
	if p.Maps[0].LiveSizes[5] != 1 || len(p.Maps[0].Runs) != 1 || p.Maps[0].Runs[0] != (Run{0x1000, 0x1020, 0}) {
		t.Errorf("map %+v", p.Maps[0])
	}
	if p.AllocSizes[5] != 1 || p.AllocSizes[1] != 1 {
		t.Errorf("alloc sizes %v", p.AllocSizes[:8])
	}
	// A mark makes the next sample a heap-map moment.
	c.Mark(1010, 1, "m", nil)
	c.Sample(1020, snap(24, 24), oneBlock{})
	p = c.History().Processes[0]
	if last := p.Maps[len(p.Maps)-1]; last.Time != 1020 || p.Marks[0] != (Mark{Time: 1010, Label: "m"}) {
		t.Errorf("after a mark: last map at %d, marks %v", last.Time, p.Marks)
	}
}

// TestEvict: past MaxProcesses, gone processes go, smallest heap first;
// processes still in the snapshot stay.
func TestEvict(t *testing.T) {
	c := New(Options{MaxProcesses: 2})
	one := func(pid uint32, live uint64) aggregate.Snapshot {
		s := snap(live, live)
		s.Processes[0].PID = pid
		return s
	}
	c.Sample(1, one(1, 100), nil)
	c.Sample(2, one(2, 10), nil)
	c.Sample(3, one(3, 50), nil) // 2 is gone and smallest
	c.Sample(4, one(4, 1), nil)  // 3 is gone and smaller than 1
	var pids []uint32
	for _, p := range c.History().Processes {
		pids = append(pids, p.PID)
	}
	if len(pids) != 2 || pids[0] != 1 || pids[1] != 4 {
		t.Errorf("kept %v, want [1 4]", pids)
	}
}

// TestStackBreakdown: a call site broken down by stack (sampled mode's
// stacks) is one timeline site per stack with live bytes, as --detail's
// sites are.
func TestStackBreakdown(t *testing.T) {
	c := New(Options{})
	c.Sample(10, aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 1, Comm: "p",
		Heap: aggregate.Stats{LiveBytes: 700},
		Sites: []aggregate.SiteSnapshot{{Address: 1, StackID: -1, Stats: aggregate.Stats{LiveBytes: 700},
			Stacks: []aggregate.StackShare{
				{StackID: 4, Stats: aggregate.Stats{LiveBytes: 500}},
				{StackID: -1, Stats: aggregate.Stats{LiveBytes: 200}},
				{StackID: 7, Stats: aggregate.Stats{AllocBytes: 90}}, // nothing live
			}}}}}}, nil)
	p := c.History().Processes[0]
	got := map[aggregate.SiteKey]uint64{}
	for i, v := range p.Samples[0].Sites {
		got[p.Sites[i]] = v
	}
	want := map[aggregate.SiteKey]uint64{{Address: 1, StackID: 4}: 500, {Address: 1, StackID: -1}: 200}
	if !maps.Equal(got, want) {
		t.Errorf("sites %v, want %v", got, want)
	}
}

// TestAfter: a short run fed event by event through an aggregate.Table
// (phases.c's shape, in blocks of 100 bytes): a point per step of
// turnover while young, then none; the marks at their turnover, each with
// a heap-map moment; the peak's moment is the mark's there; the end's.
func TestAfter(t *testing.T) {
	tb := aggregate.NewTable()
	tb.AddProcess(1, "p")
	c := New(Options{StepBytes: 100, YoungPoints: 8, Young: 1000})
	now := uint64(0)
	apply := func(k event.Kind, addr uint64) {
		now++
		e := event.Event{PID: 1, Time: now, Kind: k, Addr: addr, StackID: -1, CallSite: 0x10}
		if k == event.Alloc {
			e.Size = 100
		}
		c.Observe(&e)
		tb.Apply(&e)
		c.After(&e, tb)
	}
	mark := func(label string) {
		now++
		m := tb.Mark(1, label, now)
		c.Mark(m.Time, 1, m.Label, tb)
	}
	for i := uint64(1); i <= 3; i++ { // churn: 300 allocated and freed
		apply(event.Alloc, 0x1000*i)
		apply(event.Free, 0x1000*i)
	}
	mark("churn")
	for i := uint64(1); i <= 4; i++ { // peak: 400 live
		apply(event.Alloc, 0x1000*i)
	}
	mark("peak")
	apply(event.Free, 0x1000)
	mark("kept")
	c.End(now+1, tb.Snapshot(), tb)
	p := c.History().Processes[0]

	var points []uint64
	for _, s := range p.Samples {
		points = append(points, s.Turnover, s.LiveBytes)
	}
	// Young points every step of turnover (100, doubling after every
	// two points: 100, 200, 400): at 100, 200, 400 and 600; the mark
	// churn's; then the peak's, each time live tops the last by 1/64 as
	// the table takes a peak snapshot (800, 900, 1000; at 100 it was the
	// young point); the marks peak's and kept's; the end's.
	want := []uint64{100, 100, 200, 0, 400, 0, 600, 0, // young
		600, 0, // mark "churn"
		800, 200, 900, 300, 1000, 400, // peak points
		1000, 400, // mark "peak"
		1100, 300, // mark "kept"
		1100, 300} // end
	if !slices.Equal(points, want) {
		t.Errorf("points (turnover, live) %v\nwant %v", points, want)
	}
	var marks []Mark
	for _, m := range p.Marks {
		marks = append(marks, Mark{Label: m.Label, Turnover: m.Turnover})
	}
	if w := []Mark{{Label: "churn", Turnover: 600}, {Label: "peak", Turnover: 1000}, {Label: "kept", Turnover: 1100}}; !slices.Equal(marks, w) {
		t.Errorf("marks %v, want %v", marks, w)
	}
	var moments []string
	for _, m := range p.Maps {
		moments = append(moments, fmt.Sprintf("%d %q %d", m.Turnover, m.Why, len(m.Runs)))
	}
	if got, w := strings.Join(moments, ", "), `100 "" 1, 600 "mark" 0, 1000 "mark, peak" 4, 1100 "mark, end" 3`; got != w {
		t.Errorf("heap-map moments %s\nwant %s", got, w)
	}
	if p.Peak.Turnover != 1000 || p.Peak.Bytes != 400 {
		t.Errorf("peak %+v, want 400 bytes at turnover 1000", p.Peak)
	}
}
