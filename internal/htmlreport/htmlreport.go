// Package htmlreport writes one self-contained HTML page picturing a run:
// a timeline of the live heap stacked by call site, the decaying rates on
// a log scale, a flame graph, a heap map (MemMon's picture of where the
// blocks lie, coloured by call site) and size histograms. Scripts, styles
// and data are inline; the page makes no request. The web assets are
// files under assets/, embedded.
package htmlreport

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/history"
	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/textsafe"
)

var (
	//go:embed assets/page.html
	pageHTML string
	//go:embed assets/report.css
	reportCSS string
	//go:embed assets/report.js
	reportJS string
)

// Options shape the page.
type Options struct {
	Title string
	// Colors override the default palette for the call sites they match.
	Colors []ColorRule
	// Legend is how many of the largest call sites get palette colours
	// and their own layer in the timeline (default len(DefaultPalette)).
	Legend int
}

// Write writes the page for h. final is the run's last snapshot (what was
// allocated over the run, per call site, or per stack where a site is
// broken down by stack); src names call sites and their stacks.
func Write(w io.Writer, h history.History, final aggregate.Snapshot, src pprofout.Sources, o Options) error {
	if o.Legend <= 0 {
		o.Legend = len(DefaultPalette)
	}
	d := pageData{Title: o.Title, SampleBytes: h.SampleBytes, OtherColor: OtherColor, Processes: []processData{}}
	finals := map[uint32]aggregate.ProcessSnapshot{}
	for _, p := range final.Processes {
		finals[p.PID] = p
	}
	for _, p := range h.Processes {
		if len(p.Samples) == 0 {
			continue
		}
		d.Processes = append(d.Processes, buildProcess(p, finals[p.PID], src, o))
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode page data: %w", err)
	}
	page := strings.NewReplacer(
		"/*CSS*/", reportCSS,
		"/*JS*/", reportJS,
		"/*DATA*/", string(data), // json.Marshal escapes <, > and &: no "</script>" inside
		"TITLE", htmlEscape(textsafe.String(o.Title)), // the command may be named with escapes (textsafe)
	).Replace(pageHTML)
	if _, err := io.WriteString(w, page); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

func htmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

type pageData struct {
	Title       string        `json:"title"`
	SampleBytes uint64        `json:"sampleBytes"`
	OtherColor  string        `json:"otherColor"`
	Processes   []processData `json:"processes"`
}

type processData struct {
	PID    uint32      `json:"pid"`
	Comm   string      `json:"comm"`
	Sites  []siteData  `json:"sites"`
	Groups []groupData `json:"groups"`
	// Frames are the frames of the sites' stacks, each once: [label, full
	// name + location]. Stacks share most of their frames, so the page
	// names each once.
	Frames [][2]string `json:"frames"`
	// Top are the groups with their own timeline layer and legend entry.
	Top []int `json:"top"`
	// Times are seconds since the first sample; Turnover the heap bytes
	// allocated plus freed by then (massif's --time-unit=B).
	Times    []float64 `json:"t"`
	Turnover []uint64  `json:"x"`
	// Axis is what the pictures are drawn against: "time", or "bytes"
	// (turnover) for a process traced for less than ShortRun, whose wall
	// time says little.
	Axis   string   `json:"axis"`
	Live   []uint64 `json:"live"`
	Blocks []uint64 `json:"blocks"`
	Mapped []uint64 `json:"mapped"`
	// HeapResident is the heap's resident bytes (the footprint), null
	// before the first reading: no line is drawn there (a 0 read as "the
	// heap holds nothing" while it held megabytes).
	HeapResident []*uint64 `json:"heapResident"`
	// Cold is the live memory cold in the latest --access epoch
	// (docs/access.md), null before the first or without --access.
	Cold    []*uint64  `json:"cold"`
	SiteLiv [][]uint64 `json:"siteLive"` // per sample: site, bytes, site, bytes...
	Rates   []rateData `json:"rates"`
	Peak    struct {
		T     float64 `json:"t"`
		X     uint64  `json:"x"`
		Bytes uint64  `json:"bytes"`
	} `json:"peak"`
	Marks      []markData `json:"marks"`
	Maps       []mapData  `json:"maps"`
	AllocSizes []uint64   `json:"allocSizes"`
	// AllocatedRest is what the sites left out of the page allocated
	// (allocatedOnly).
	AllocatedRest uint64 `json:"allocatedRest"`
	// Resident: resident memory by who made it resident (sampled page
	// faults, estimates), one entry per site, for the flame graph's
	// "resident" view.
	Resident []residentData `json:"resident"`
}

// groupData is a call site (its leaf frame), the unit of colours.
type groupData struct {
	Label    string `json:"label"`
	Full     string `json:"full"`
	Location string `json:"loc"`
	Module   string `json:"module"`
	Color    string `json:"color"`
}

type siteData struct {
	// The leaf frame's names, which its group carries.
	Label, Full, Location, Module string `json:"-"`

	Group int   `json:"group"`
	Stack []int `json:"stack"` // outermost first, by index into processData.Frames
	// Allocated over the run (final snapshot).
	Allocated uint64 `json:"allocated"`
	Allocs    uint64 `json:"allocs"`
}

// residentData is one resident site: its stack (as siteData's) and its
// estimated resident bytes.
type residentData struct {
	Stack []int  `json:"stack"`
	Bytes uint64 `json:"bytes"`
}

type rateData struct {
	HalfLife string    `json:"halfLife"`
	Alloc    []float64 `json:"alloc"`
	Freed    []float64 `json:"freed"`
	Net      []float64 `json:"net"`
}

type markData struct {
	T     float64 `json:"t"`
	X     uint64  `json:"x"`
	Label string  `json:"label"`
}

type mapData struct {
	T   float64 `json:"t"`
	X   uint64  `json:"x"`
	Why string  `json:"why"` // "mark", "peak", "end" or several; "" for a periodic moment
	// Runs: per run, its start minus the previous run's end (the first:
	// its address), its length and its site.
	Runs      []int64  `json:"runs"`
	LiveSizes []uint64 `json:"liveSizes"`
	// Cold, with --access: per run, 1 when it was cold at the latest
	// epoch (drawn grey), else 0; absent without --access.
	Cold []int `json:"cold,omitempty"`
}

func buildProcess(p history.Process, final aggregate.ProcessSnapshot, src pprofout.Sources, o Options) processData {
	t0 := p.Samples[0].Time
	sec := func(t uint64) float64 {
		if t < t0 {
			return 0
		}
		return float64(t-t0) / 1e9
	}
	// Empty lists, not null: the script iterates them.
	d := processData{PID: p.PID, Comm: p.Comm, AllocSizes: trimZeros(p.AllocSizes[:]),
		Top: []int{}, Rates: []rateData{}, Marks: []markData{}, Maps: []mapData{}, Sites: []siteData{}, Groups: []groupData{},
		Frames: [][2]string{}}
	frameIdx := map[[2]string]int{}
	frameOf := func(f [2]string) int {
		i, ok := frameIdx[f]
		if !ok {
			i = len(d.Frames)
			frameIdx[f] = i
			d.Frames = append(d.Frames, f)
		}
		return i
	}

	// Name the sites; sites of one call site (with --detail, or broken
	// down by stack in sampled mode, one per stack) form a group: one
	// colour, one timeline layer, one legend entry.
	groupOf := map[string]int{}
	finalSites := map[aggregate.SiteKey]aggregate.Stats{}
	for _, site := range final.Sites {
		if site.Category != aggregate.Heap {
			continue
		}
		for _, s := range site.ByStack() { // as the history has them
			finalSites[s.Key()] = s.Stats
		}
	}
	d.Resident = []residentData{}
	if r := final.Resident; r != nil {
		for _, rs := range r.Sites {
			sd := site(p.PID, aggregate.SiteKey{Address: rs.Address, StackID: rs.StackID}, src, frameOf)
			d.Resident = append(d.Resident, residentData{Stack: sd.Stack, Bytes: rs.Bytes})
		}
	}
	extra, rest := allocatedOnly(p.Sites, finalSites)
	d.AllocatedRest = rest
	for _, k := range append(slices.Clone(p.Sites), extra...) {
		sd := site(p.PID, k, src, frameOf)
		key := sd.Label + "\x00" + sd.Location + "\x00" + sd.Module
		g, ok := groupOf[key]
		if !ok {
			g = len(d.Groups)
			groupOf[key] = g
			d.Groups = append(d.Groups, groupData{Label: sd.Label, Full: sd.Full, Location: sd.Location, Module: sd.Module})
		}
		sd.Group = g
		st := finalSites[k]
		sd.Allocated, sd.Allocs = st.AllocBytes, st.Allocs
		d.Sites = append(d.Sites, sd)
	}

	// Rank the groups by their highest live bytes over the run.
	most := make([]uint64, len(d.Groups))
	for _, s := range p.Samples {
		sum := make([]uint64, len(d.Groups))
		for i, v := range s.Sites {
			sum[d.Sites[i].Group] += v
		}
		for g, v := range sum {
			most[g] = max(most[g], v)
		}
	}
	order := make([]int, len(d.Groups))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(most[b], most[a]) })
	for _, g := range order {
		if len(d.Top) == o.Legend || most[g] == 0 {
			break
		}
		d.Top = append(d.Top, g)
	}
	for g := range d.Groups {
		d.Groups[g].Color = OtherColor
	}
	for rank, g := range d.Top {
		d.Groups[g].Color = DefaultPalette[rank%len(DefaultPalette)]
	}
	for g := range d.Groups {
		for _, r := range o.Colors {
			if r.match(d.Groups[g].Full, d.Groups[g].Module) {
				d.Groups[g].Color = r.Color
				break
			}
		}
	}

	// One curve per half-life, one point per sample (0 where a sample has
	// no rates), so that every array lines up with the times.
	for _, s := range p.Samples {
		for j := len(d.Rates); j < len(s.Rates); j++ {
			d.Rates = append(d.Rates, rateData{HalfLife: report.HalfLifeText(s.Rates[j].HalfLife),
				Alloc: make([]float64, len(d.Times)), Freed: make([]float64, len(d.Times)), Net: make([]float64, len(d.Times))})
		}
		d.Times = append(d.Times, sec(s.Time))
		d.Turnover = append(d.Turnover, s.Turnover)
		d.Live = append(d.Live, s.LiveBytes)
		d.Blocks = append(d.Blocks, s.LiveBlocks)
		d.Mapped = append(d.Mapped, s.MappedBytes)
		var hr *uint64
		if s.HeapRead {
			hr = &s.HeapResident
		}
		d.HeapResident = append(d.HeapResident, hr)
		var cold *uint64
		if s.ColdRead {
			cold = &s.ColdBytes
		}
		d.Cold = append(d.Cold, cold)
		ids := slices.Sorted(maps.Keys(s.Sites)) // a stable page for a given run
		sl := make([]uint64, 0, 2*len(ids))
		for _, i := range ids {
			sl = append(sl, uint64(i), s.Sites[i])
		}
		d.SiteLiv = append(d.SiteLiv, sl)
		for j := range d.Rates {
			var r aggregate.RateSnapshot
			if j < len(s.Rates) {
				r = s.Rates[j]
			}
			rd := &d.Rates[j]
			rd.Alloc = append(rd.Alloc, r.AllocBytesPerSec)
			rd.Freed = append(rd.Freed, r.FreedBytesPerSec)
			rd.Net = append(rd.Net, r.NetBytesPerSec)
		}
	}
	d.Axis = "time"
	if last := p.Samples[len(p.Samples)-1]; last.Time-t0 < uint64(ShortRun) && last.Turnover > 0 {
		d.Axis = "bytes"
	}
	d.Peak.T, d.Peak.X, d.Peak.Bytes = sec(p.Peak.Time), p.Peak.Turnover, p.Peak.Bytes
	for _, m := range p.Marks {
		d.Marks = append(d.Marks, markData{sec(m.Time), m.Turnover, m.Label})
	}
	for _, m := range p.Maps {
		md := mapData{T: sec(m.Time), X: m.Turnover, Why: m.Why, LiveSizes: trimZeros(m.LiveSizes[:]), Runs: []int64{}}
		prev := uint64(0)
		for _, r := range m.Runs {
			md.Runs = append(md.Runs, int64(r.Start-prev), int64(r.End-r.Start), int64(r.Site))
			prev = r.End
		}
		for _, c := range m.Cold {
			md.Cold = append(md.Cold, map[bool]int{true: 1}[c])
		}
		d.Maps = append(d.Maps, md)
	}
	return d
}

// ShortRun: a process traced for less time is drawn against the bytes it
// turned over rather than time. Its rates (one value per rate period,
// 100 ms by default) would be fewer than ten points, and the times of its
// events are the reader's estimates between two reads of the ring
// (tracer.Drainer.Poll), while its turnover is exact.
const ShortRun = time.Second

// allocatedSites bounds the sites named for the flame graph's bytes
// allocated over the run beyond those of the history, so that the page
// stays small: each brings its stack and the frames not yet named.
var allocatedSites = 500

// allocatedOnly returns the sites of final (by stack) that allocated but
// that the history does not name, having never been among the largest
// live at its moments (short-lived blocks), the largest allocated first,
// at most allocatedSites of them; rest is what the others allocated.
func allocatedOnly(named []aggregate.SiteKey, final map[aggregate.SiteKey]aggregate.Stats) (extra []aggregate.SiteKey, rest uint64) {
	known := make(map[aggregate.SiteKey]bool, len(named))
	for _, k := range named {
		known[k] = true
	}
	for k, st := range final {
		if !known[k] && st.AllocBytes > 0 {
			extra = append(extra, k)
		}
	}
	slices.SortFunc(extra, func(a, b aggregate.SiteKey) int {
		if r := cmp.Compare(final[b].AllocBytes, final[a].AllocBytes); r != 0 {
			return r
		}
		if r := cmp.Compare(a.Address, b.Address); r != 0 {
			return r
		}
		return cmp.Compare(a.StackID, b.StackID)
	})
	if len(extra) > allocatedSites {
		for _, k := range extra[allocatedSites:] {
			rest += final[k].AllocBytes
		}
		extra = extra[:allocatedSites]
	}
	return extra, rest
}

// site names a call site and its stack, outermost frame first, each frame
// by frameOf's index of its [label, full name + location].
func site(pid uint32, k aggregate.SiteKey, src pprofout.Sources, frameOf func([2]string) int) siteData {
	var frames []symbolize.Frame
	if src.Stacks != nil && k.StackID >= 0 {
		frames = src.Stacks.Stack(pid, aggregate.SiteSnapshot{Address: k.Address, StackID: k.StackID}).Frames
	}
	if len(frames) == 0 {
		f := symbolize.Frame{Address: k.Address}
		if src.Symbolizer != nil {
			f = src.Symbolizer.Resolve(int(pid), k.Address)
			f.Address = k.Address
		}
		frames = []symbolize.Frame{f}
	}
	leaf := frames[0]
	sd := siteData{Label: report.FunctionLabel(leaf), Full: fullName(leaf), Location: report.LocationLabel(leaf), Module: report.ModuleLabel(leaf)}
	for i := len(frames) - 1; i >= 0; i-- {
		f := frames[i]
		full := fullName(f)
		if f.File != "" {
			full += " at " + f.File + ":" + fmt.Sprint(f.Line)
		}
		sd.Stack = append(sd.Stack, frameOf([2]string{report.FunctionLabel(f), full}))
	}
	return sd
}

func fullName(f symbolize.Frame) string {
	if f.Function == "" {
		return report.FunctionLabel(f)
	}
	return f.Function
}

func trimZeros(h []uint64) []uint64 {
	n := len(h)
	for n > 0 && h[n-1] == 0 {
		n--
	}
	return slices.Clone(h[:n])
}
