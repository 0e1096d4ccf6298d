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

	"github.com/memtrace/memtrace/aggregate"
)

// The whole-host layout (Options.Host): one table of processes, ranked by
// the sort key and cut to Top (all of them in a report of exited
// processes), then the call sites of all processes ranked together and
// cut to Top, heap then mmap, each with its process's pid and comm.

// hostSite is one call site of one process, in the host-wide ranking.
type hostSite struct {
	pid  uint32
	comm string
	aggregate.SiteSnapshot
}

// hostView is what both renderers show of a whole-host snapshot.
type hostView struct {
	procs        []aggregate.ProcessSnapshot // shown, ranked
	totalProcs   int
	heap, mapped []hostSite // shown, ranked
	heapTotal    int
	mappedTotal  int
}

func newHostView(s aggregate.Snapshot, o Options) hostView {
	v := hostView{procs: RankProcesses(s.Processes, o.Sort), totalProcs: len(s.Processes)}
	if !o.Exited && o.Top > 0 && len(v.procs) > o.Top {
		v.procs = v.procs[:o.Top]
	}
	for _, p := range s.Processes {
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
	return v
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
	v := newHostView(s, o)
	lost := runLostEvents(s)
	if o.Exited {
		fmt.Fprintf(&b, "=== memtrace: final records of %s that exited, at t=%s (monotonic clock) ===\n",
			processCount(v.totalProcs), monotonicSeconds(s.Time))
		if lost > 0 {
			writeLostWarning(&b, lost)
		}
	} else {
		writeBanner(&b, s.Time, lost, o.Final)
		fmt.Fprintf(&b, "whole host: %s traced\n", processCount(v.totalProcs))
	}
	if s.SampleBytes > 0 {
		b.WriteString(samplingLine(s.SampleBytes, o.Raw) + "\n")
	}
	fmt.Fprintf(&b, "lost events: %d\n", lost)
	if v.totalProcs == 0 {
		b.WriteString("no allocations traced\n")
	} else if err := writeHostProcesses(&b, v, o); err != nil {
		return err
	}
	for _, c := range []aggregate.Category{aggregate.Heap, aggregate.Mapped} {
		sites, total := v.heap, v.heapTotal
		if c == aggregate.Mapped {
			sites, total = v.mapped, v.mappedTotal
		}
		if total == 0 {
			continue
		}
		if err := writeHostSites(&b, c, sites, total, sym, o); err != nil {
			return err
		}
	}
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
	what := "processes"
	if o.Exited {
		what = "processes that exited"
	}
	if len(v.procs) < v.totalProcs {
		fmt.Fprintf(b, "  %s by %s (top %d of %d):\n", what, o.Sort.describe(aggregate.Heap), len(v.procs), v.totalProcs)
	} else {
		fmt.Fprintf(b, "  %s by %s (all %d):\n", what, o.Sort.describe(aggregate.Heap), v.totalProcs)
	}
	sampled := o.sampleBytes > 0
	head := []any{"PID", "COMM", est(sampled, "LIVE")}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft, tw.AlignRight}
	if sampled {
		head = append(head, "± LIVE")
		align = append(align, tw.AlignRight)
	}
	head = append(head, est(sampled, "BLOCKS"), "ALLOCATED", "CALLS", est(sampled, "FREED"), est(sampled, "PEAK LIVE"), "ANON MMAP", "LOST")
	align = append(align, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight)
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
	return c
}

func writeHostSites(b *bytes.Buffer, c aggregate.Category, sites []hostSite, total int, sym Symbolizer, o Options) error {
	b.WriteByte('\n')
	what := "heap call sites across the host"
	if c == aggregate.Mapped {
		what = "anonymous mmap call sites across the host"
	}
	if len(sites) < total {
		fmt.Fprintf(b, "  %s by %s (top %d of %d):\n", what, o.Sort.describe(c), len(sites), total)
	} else {
		fmt.Fprintf(b, "  %s by %s (all %d):\n", what, o.Sort.describe(c), total)
	}
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

// writeHostJSON is WriteJSON's whole-host layout: the report line, the
// process lines, then the heap and mmap callsite lines of all processes
// ranked together.
func writeHostJSON(w io.Writer, s aggregate.Snapshot, sym Symbolizer, o Options) error {
	v := newHostView(s, o)
	records := []any{o.Epoch.report(reportRecord{
		Type:        typeReport,
		TimeNS:      s.Time,
		Final:       o.Final,
		LostEvents:  runLostEvents(s),
		Processes:   len(v.procs),
		Sort:        o.Sort,
		Top:         o.Top,
		Host:        true,
		Sampled:     s.SampleBytes > 0,
		SampleBytes: s.SampleBytes,
		Kernel:      o.Kernel,
		Attach:      o.Attach,
	})}
	for _, p := range v.procs {
		rp := rankedProcess{ProcessSnapshot: p}
		pr := newProcessRecord(rp, s.Time, o.Final)
		fillProcessSampling(&pr, rp, s.SampleBytes)
		fillProcessLeaks(&pr, o.Leaks, p.PID)
		pr.epochRecord = o.Epoch.process(p) // dumps (epoch.go)
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
	return writeRecords(w, records)
}
