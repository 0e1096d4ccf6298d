package report

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// The whole-host layout (Options.Host): one table of processes, ranked by
// the sort key and cut to Top (all of them in a report of exited
// processes), then the call sites of all processes ranked together and
// cut to Top, heap then mmap, each with its process's pid and comm.
// Then the peak snapshots, readable with hundreds of processes: the text
// shows the Top processes by peak live bytes and, ranked together, the
// Top heap sites live at their peaks; JSON gives every listed process its
// peak record and at most Top peak_callsite records. Last, the marks of
// the listed processes (text: the last Top).

// hostSite is one call site of one process, in the host-wide ranking.
type hostSite struct {
	pid  uint32
	comm string
	aggregate.SiteSnapshot
}

// hostView is what both renderers show of a whole-host snapshot.
type hostView struct {
	// listed are the processes of the list by footprint (hostlist.go):
	// every process, traced or not, ranked by HostKey, cut to Top (a
	// report of exits in JSON: all of them).
	listed      []aggregate.ProcessSnapshot
	listKey     SortKey
	totalListed int
	// procs are the processes of the allocator table: the traced ones,
	// ranked by the sort key, cut to Top (all in JSON's report of exits).
	procs        []aggregate.ProcessSnapshot
	totalProcs   int
	heap, mapped []hostSite // shown, ranked
	heapTotal    int
	mappedTotal  int
	// peaks are the processes with a peak snapshot, by peak live bytes,
	// cut to Top; peakSites their sites live then, ranked together.
	peaks          []aggregate.ProcessSnapshot
	totalPeaks     int
	peakSites      []hostSite
	peakSitesTotal int
}

// newHostView ranks a snapshot for a whole-host report; all says the
// processes are not cut to Top (JSON's report of exits lists them all).
func newHostView(s aggregate.Snapshot, o Options, all bool) hostView {
	traced := slices.DeleteFunc(slices.Clone(s.Processes), func(p aggregate.ProcessSnapshot) bool { return p.Untraced })
	// Without any footprint reading (processes that exited before a
	// report read them, a replay of an old recording) the list is by
	// what was made resident.
	key := HostKey(o.Sort)
	if !anyFootprint(s.Processes) {
		key = SortResident
	}
	v := hostView{listed: RankHost(s.Processes, key), listKey: key, totalListed: len(s.Processes),
		procs: RankProcesses(traced, o.Sort), totalProcs: len(traced)}
	if !all && o.Top > 0 {
		v.listed = v.listed[:min(len(v.listed), o.Top)]
		v.procs = v.procs[:min(len(v.procs), o.Top)]
	}
	for _, p := range traced {
		for _, site := range p.Sites {
			hs := hostSite{pid: p.PID, comm: p.Comm, SiteSnapshot: site}
			if site.Category == aggregate.Mapped {
				v.mapped = append(v.mapped, hs)
			} else {
				v.heap = append(v.heap, hs)
			}
		}
	}
	v.heapTotal, v.mappedTotal = len(v.heap), len(v.mapped)
	v.heap, v.mapped = topHostSites(v.heap, o), topHostSites(v.mapped, o)
	v.rankPeaks(s, o)
	return v
}

// rankPeaks picks the processes of the text's "at the peak" section and
// their sites.
func (v *hostView) rankPeaks(s aggregate.Snapshot, o Options) {
	for _, p := range s.Processes {
		if p.Peak != nil && !p.Untraced {
			v.peaks = append(v.peaks, p)
		}
	}
	v.totalPeaks = len(v.peaks)
	slices.SortFunc(v.peaks, func(a, b aggregate.ProcessSnapshot) int {
		return cmp.Or(cmp.Compare(b.PeakLiveBytes, a.PeakLiveBytes), cmp.Compare(a.PID, b.PID))
	})
	if o.Top > 0 && len(v.peaks) > o.Top {
		v.peaks = v.peaks[:o.Top]
	}
	for _, p := range v.peaks {
		for _, site := range p.Peak.Sites {
			v.peakSites = append(v.peakSites, hostSite{pid: p.PID, comm: p.Comm, SiteSnapshot: site})
		}
	}
	v.peakSitesTotal = len(v.peakSites)
	o.Sort = SortLive
	v.peakSites = topHostSites(v.peakSites, o)
}

// topHostSites ranks sites as topSites does, ties going to the lower pid.
func topHostSites(sites []hostSite, o Options) []hostSite {
	slices.SortFunc(sites, func(a, b hostSite) int {
		return cmp.Or(
			o.Sort.compareSites(a.SiteSnapshot, b.SiteSnapshot),
			cmp.Compare(b.LiveBytes, a.LiveBytes),
			cmp.Compare(b.AllocBytes, a.AllocBytes),
			cmp.Compare(b.Allocs, a.Allocs),
			cmp.Compare(a.pid, b.pid),
			cmp.Compare(a.Address, b.Address),
		)
	})
	if o.Top > 0 && len(sites) > o.Top {
		sites = sites[:o.Top]
	}
	return sites
}

// writeHostText is WriteText's whole-host layout.
func writeHostText(w io.Writer, s aggregate.Snapshot, sym Symbolizer, o Options) error {
	var b bytes.Buffer
	v := newHostView(s, o, false)
	lost := runLostEvents(s)
	if o.Exited {
		fmt.Fprintf(&b, "=== memtrace: %s exited since the last report, at t=%s (monotonic clock) ===\n",
			processCount(v.totalListed), monotonicSeconds(s.Time))
		if lost > 0 {
			writeLostWarning(&b, lost)
		}
	} else {
		writeBanner(&b, s.Time, lost, o.Final)
		fmt.Fprintf(&b, "whole host: %s, %d traced (memtrace saw their faults or allocations)\n",
			processCount(v.totalListed), v.totalProcs)
	}
	if s.SampleBytes > 0 {
		b.WriteString(samplingLine(s.SampleBytes, o.Raw) + "\n")
	}
	fmt.Fprintf(&b, "lost events: %d\n", lost)
	if o.ResidentOnly {
		b.WriteString("resident memory only: no allocator traced (--heap traces them)\n")
	}
	if err := writeHostList(&b, v, o); err != nil { // hostlist.go
		return err
	}
	switch {
	case o.ResidentOnly: // no allocator table
	case v.totalProcs == 0:
		b.WriteString("no allocations traced\n")
	default:
		if err := writeHostProcesses(&b, v, o); err != nil {
			return err
		}
	}
	for _, c := range []aggregate.Category{aggregate.Heap, aggregate.Mapped} {
		sites, total := v.heap, v.heapTotal
		if c == aggregate.Mapped {
			sites, total = v.mapped, v.mappedTotal
		}
		if total == 0 {
			continue
		}
		what := "heap call sites across the host"
		if c == aggregate.Mapped {
			what = "anonymous mmap call sites across the host"
		}
		if err := writeHostSites(&b, c, sites, shownOf(what+" by "+o.Sort.describe(c), len(sites), total), sym, o); err != nil {
			return err
		}
	}
	if err := writeHostPeaks(&b, v, sym, o); err != nil {
		return err
	}
	if err := writeHostResident(&b, s, sym, o); err != nil { // resident.go
		return err
	}
	writeHostMarks(&b, s, v, o)
	if lost > 0 && v.totalProcs > 0 {
		b.WriteByte('\n')
		writeLostWarning(&b, lost)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write text report: %w", err)
	}
	return nil
}

func hostTable(out *bytes.Buffer, align []tw.Align) *tablewriter.Table {
	a := tw.CellAlignment{PerColumn: align}
	return tablewriter.NewTable(out,
		tablewriter.WithRenderer(renderer.NewBlueprint(plainRendition)),
		tablewriter.WithHeaderAlignmentConfig(a),
		tablewriter.WithRowAlignmentConfig(a),
		tablewriter.WithHeaderAutoFormat(tw.Off),
	)
}

// est marks a header when the figures under it are estimates.
func est(sampled bool, h string) string {
	if sampled {
		return estMark + h
	}
	return h
}

func writeHostProcesses(b *bytes.Buffer, v hostView, o Options) error {
	b.WriteByte('\n')
	what := "allocators of the traced processes"
	if o.Exited {
		what = "allocators of the processes that exited"
	}
	by := o.Sort.describe(aggregate.Heap)
	if o.Sort.ranksFootprint() {
		by = describeHost(o.Sort) // hostlist.go
	}
	fmt.Fprintf(b, "  %s\n", shownOf(what+", by "+by, len(v.procs), v.totalProcs))
	sampled := o.sampleBytes > 0
	head := []any{"PID", "COMM", est(sampled, "LIVE")}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight}
	if sampled {
		head = append(head, "± LIVE")
		align = append(align, tw.AlignRight)
	}
	head = append(head, est(sampled, "BLOCKS"), "ALLOCATED", "CALLS", est(sampled, "FREED"), est(sampled, "PEAK LIVE"), "ANON MMAP", "LOST")
	align = append(align, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight)
	foot := anyFootprint(v.procs) // footprint.go
	if foot {
		head = append(head, footprintColumns...)
		align = append(align, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight)
	}
	var out bytes.Buffer
	t := hostTable(&out, align)
	t.Header(head...)
	for _, p := range v.procs {
		h := p.Heap
		mark := ""
		if sampled && !p.CountsExact {
			mark = estMark // no exact counts for this one: these are estimates too
		}
		row := []string{strconv.FormatUint(uint64(p.PID), 10), commLabel(p.Comm), byteCell(h.LiveBytes, o.Raw)}
		if sampled {
			row = append(row, byteCell(roundStderr(p.LiveBytesStderr), o.Raw))
		}
		row = append(row, strconv.FormatUint(h.LiveAllocs, 10),
			mark+byteCell(h.AllocBytes, o.Raw), mark+strconv.FormatUint(h.Allocs, 10),
			byteCell(h.FreedBytes, o.Raw), byteCell(p.PeakLiveBytes, o.Raw),
			byteCell(p.Mapped.LiveBytes, o.Raw), strconv.FormatUint(p.LostEvents, 10))
		if foot {
			row = append(row, footprintCells(p, o.Raw)...)
		}
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add process %d: %w", p.PID, err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render processes: %w", err)
	}
	indentTable(b, out.String())
	return nil
}

func processCount(n int) string {
	if n == 1 {
		return "1 process"
	}
	return strconv.Itoa(n) + " processes"
}

func commLabel(c string) string {
	if c == "" {
		return "?"
	}
	return textsafe.String(c)
}

// shownOf is a table's title: what it lists, and how many of how many.
func shownOf(what string, shown, total int) string {
	if shown < total {
		return fmt.Sprintf("%s (top %d of %d):", what, shown, total)
	}
	return fmt.Sprintf("%s (all %d):", what, total)
}

func writeHostSites(b *bytes.Buffer, c aggregate.Category, sites []hostSite, title string, sym Symbolizer, o Options) error {
	b.WriteByte('\n')
	b.WriteString("  " + title + "\n")
	sampled := o.sampleBytes > 0 && c == aggregate.Heap
	cols := heapColumns
	if c == aggregate.Mapped {
		cols = mappedColumns
	}
	head := []any{"PID", "COMM"}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft}
	for i, col := range cols {
		if i < 5 {
			head = append(head, est(sampled, col.(string)))
			align = append(align, tw.AlignRight)
		} else {
			head = append(head, col)
			align = append(align, tw.AlignLeft)
		}
		if i == 0 && sampled {
			head = append(head, "± LIVE")
			align = append(align, tw.AlignRight)
		}
	}
	var out bytes.Buffer
	t := hostTable(&out, align)
	t.Header(head...)
	for _, s := range sites {
		f := resolve(sym, s.pid, s.Address)
		row := []string{strconv.FormatUint(uint64(s.pid), 10), commLabel(s.comm), byteCell(s.LiveBytes, o.Raw)}
		if sampled {
			row = append(row, byteCell(roundStderr(s.LiveBytesStderr), o.Raw))
		}
		row = append(row, strconv.FormatUint(s.LiveAllocs, 10), byteCell(s.AllocBytes, o.Raw),
			strconv.FormatUint(s.Allocs, 10), byteCell(s.FreedBytes, o.Raw),
			functionLabel(f), locationLabel(f), moduleLabel(f))
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add %s call site %s: %w", c, hex(s.Address), err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render %s call sites: %w", c, err)
	}
	indentTable(b, out.String())
	return nil
}

// writeHostPeaks is the text's "at the peak" section: the processes with
// the highest peaks, when each one's kept snapshot was taken and what it
// held, then the heap sites live at those snapshots, ranked together.
func writeHostPeaks(b *bytes.Buffer, v hostView, sym Symbolizer, o Options) error {
	if len(v.peaks) == 0 {
		return nil
	}
	b.WriteByte('\n')
	b.WriteString("  " + shownOf("at the peak: processes by peak live bytes", len(v.peaks), v.totalPeaks) + "\n")
	sampled := o.sampleBytes > 0
	head := []any{"PID", "COMM", est(sampled, "PEAK LIVE"), est(sampled, "LIVE AT SNAPSHOT")}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight, tw.AlignRight}
	if sampled {
		head = append(head, "± LIVE")
		align = append(align, tw.AlignRight)
	}
	head = append(head, "TOLERANCE", "SNAPSHOTS", "TAKEN AT")
	align = append(align, tw.AlignRight, tw.AlignRight, tw.AlignRight)
	var out bytes.Buffer
	t := hostTable(&out, align)
	t.Header(head...)
	for _, p := range v.peaks {
		pk := p.Peak
		row := []string{strconv.FormatUint(uint64(p.PID), 10), commLabel(p.Comm),
			byteCell(p.PeakLiveBytes, o.Raw), byteCell(pk.LiveBytes, o.Raw)}
		if sampled {
			row = append(row, byteCell(roundStderr(pk.LiveBytesStderr), o.Raw))
		}
		row = append(row, byteCell(pk.Tolerance, o.Raw), strconv.FormatUint(pk.Snapshots, 10),
			"t="+monotonicSeconds(pk.Time))
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add peak of process %d: %w", p.PID, err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render peaks: %w", err)
	}
	indentTable(b, out.String())
	if v.peakSitesTotal == 0 {
		return nil
	}
	o.Sort = SortLive
	title := shownOf("heap call sites live at those peaks, by live bytes at the peak", len(v.peakSites), v.peakSitesTotal)
	return writeHostSites(b, aggregate.Heap, v.peakSites, title, sym, o)
}

// writeHostMarks lists the marks of the processes shown (in the list or
// the allocator table), the last Top.
func writeHostMarks(b *bytes.Buffer, s aggregate.Snapshot, v hostView, o Options) {
	keep := map[uint32]bool{}
	for _, p := range slices.Concat(v.listed, v.procs) {
		keep[p.PID] = true
	}
	var marks []aggregate.Mark
	for _, m := range s.Marks {
		if keep[m.PID] {
			marks = append(marks, m)
		}
	}
	if len(marks) == 0 {
		return
	}
	total := len(marks)
	if o.Top > 0 && total > o.Top {
		marks = marks[total-o.Top:]
	}
	b.WriteByte('\n')
	if len(marks) < total {
		fmt.Fprintf(b, "  marks of those processes (last %d of %d):\n", len(marks), total)
	} else {
		fmt.Fprintf(b, "  marks of those processes (all %d):\n", total)
	}
	comms := map[uint32]string{}
	for _, p := range slices.Concat(v.listed, v.procs) {
		comms[p.PID] = p.Comm
	}
	for _, m := range marks {
		fmt.Fprintf(b, "    pid %d %s #%d %q at t=%s\n", m.PID, commLabel(comms[m.PID]), m.Seq, m.Label, monotonicSeconds(m.Time))
	}
}

// writeHostJSON is WriteJSON's whole-host layout: the report line, the
// marks of the processes shown, the process lines (every process of the
// list and of the allocator table, by rank, each with its footprint),
// then the heap and
// mmap callsite lines of all processes ranked together, then each listed
// process's peak line and its peak_callsite lines.
func writeHostJSON(w io.Writer, s aggregate.Snapshot, sym Symbolizer, o Options) error {
	v := newHostView(s, o, o.Exited)
	shown := v.shownByRank(s)
	records := []any{o.Epoch.report(reportRecord{
		Type:        typeReport,
		TimeNS:      s.Time,
		Final:       o.Final,
		LostEvents:  runLostEvents(s),
		Processes:   len(shown),
		Sort:        o.Sort,
		Top:         o.Top,
		Host:        true,
		Sampled:     s.SampleBytes > 0,
		SampleBytes: s.SampleBytes,
		Kernel:      o.Kernel,
		Attach:      o.Attach,
	}.selfMemory(o))}
	keep := map[uint32]bool{}
	for _, r := range shown {
		keep[r.PID] = true
	}
	records = append(records, markRecordsOf(s, keep, o.Epoch)...) // time.go
	for _, r := range shown {
		rp := rankedProcess{ProcessSnapshot: r.ProcessSnapshot}
		pr := newProcessRecord(rp, s.Time, o.Final)
		fillProcessSampling(&pr, rp, s.SampleBytes)
		fillProcessLeaks(&pr, o.Leaks, r.PID)
		pr.ManagedHeaps = managedHeapRecords(managedHeaps(r.ProcessSnapshot, sym)) // managed_heaps.go
		pr.epochRecord = o.Epoch.process(r.ProcessSnapshot)                        // dumps (epoch.go)
		rank, traced := r.rank, !r.Untraced
		pr.Rank, pr.Traced = &rank, &traced
		records = append(records, pr)
	}
	for _, sites := range [][]hostSite{v.heap, v.mapped} {
		for _, site := range sites {
			cr := newCallsiteRecord(site.pid, site.SiteSnapshot, sym, s.Time, o)
			fillSiteSampling(&cr, site.comm, site.SiteSnapshot, s.SampleBytes)
			if site.Category == aggregate.Heap {
				fillSiteLeaks(&cr, o.Leaks, site.pid, site.SiteSnapshot)
			}
			cr.epochRecord = o.Epoch.site(site.pid, site.SiteSnapshot)
			records = append(records, cr)
		}
	}
	for _, r := range shown {
		if !r.Untraced {
			records = append(records, peakRecords(rankedProcess{ProcessSnapshot: r.ProcessSnapshot}, sym, o)...) // time.go
		}
	}
	records = append(records, hostResidentRecords(s, sym, o)...) // resident.go
	return writeRecords(w, records)
}

// rankedHost is a process with its rank in the whole host's list.
type rankedHost struct {
	aggregate.ProcessSnapshot
	rank int // 1 first, in the list uncut
}

// shownByRank are the processes a report shows, the list's and the
// allocator table's (--heap: a process high by live bytes may be low by
// RSS), in the order of the list uncut, each with its rank there.
func (v hostView) shownByRank(s aggregate.Snapshot) []rankedHost {
	show := map[uint32]bool{}
	for _, p := range slices.Concat(v.listed, v.procs) {
		show[p.PID] = true
	}
	var out []rankedHost
	for i, p := range RankHost(s.Processes, v.listKey) {
		if show[p.PID] {
			out = append(out, rankedHost{p, i + 1})
		}
	}
	return out
}
