package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// WriteJSON writes the report of s to w as NDJSON: a "report" line, then
// for each process a "process" line followed by its "callsite" lines (heap,
// then mmap, each ranked by o.Sort and cut to o.Top). o.Raw does not apply:
// JSON numbers are always exact integers. Like WriteText it writes the
// whole report with one Write, so concurrent reports never interleave
// lines.
func WriteJSON(w io.Writer, s aggregate.Snapshot, sym Symbolizer, o Options) error {
	o, err := o.normalized()
	if err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	if o.Host {
		return writeHostJSON(w, s, sym, o) // host.go
	}
	procs := rank(s, o)
	rw := newRecordWriter(w)
	first := reportRecord{
		Type:       typeReport,
		TimeNS:     s.Time,
		Final:      o.Final,
		LostEvents: runLostEvents(s),
		Processes:  len(procs),
		Sort:       o.Sort,
		Top:        o.Top,
		// Sampled mode (estimate.go).
		Sampled:     s.SampleBytes > 0,
		SampleBytes: s.SampleBytes,
		Kernel:      o.Kernel,
		Attach:      o.Attach,
	}
	rw.add(o.Epoch.report(first.selfMemory(o))) // dumps (epoch.go)
	rw.add(markRecords(s, procs, o.Epoch)...)   // time.go
	// Each record is encoded as it is made: a report of every site with
	// its stack held them all at once, and its 590 MB of NDJSON besides.
	for _, p := range procs {
		pr := newProcessRecord(p, s.Time, o.Final)
		fillProcessSampling(&pr, p, s.SampleBytes)                                 // estimate.go
		fillProcessLeaks(&pr, o.Leaks, p.PID)                                      // json_leaks.go
		fillProcessJVM(&pr, p)                                                     // jvm.go
		pr.ManagedHeaps = managedHeapRecords(managedHeaps(p.ProcessSnapshot, sym)) // managed_heaps.go
		pr.epochRecord = o.Epoch.process(p.ProcessSnapshot)
		rw.add(pr)
		for _, site := range p.heap {
			cr := newCallsiteRecord(p.PID, site, sym, s.Time, o)
			fillSiteSampling(&cr, p.Comm, site, s.SampleBytes)
			fillSiteLeaks(&cr, o.Leaks, p.PID, site)
			fillSiteJVM(&cr, p, site) // jvm.go
			cr.epochRecord = o.Epoch.site(p.PID, site)
			rw.add(cr)
		}
		for _, site := range p.mapped {
			cr := newCallsiteRecord(p.PID, site, sym, s.Time, o)
			fillSiteSampling(&cr, p.Comm, site, s.SampleBytes)
			cr.epochRecord = o.Epoch.site(p.PID, site)
			rw.add(cr)
		}
		rw.add(peakRecords(p, sym, o)...)                             // time.go
		rw.add(residentRecords(p.ProcessSnapshot, sym, s.Time, o)...) // resident.go
	}
	return rw.close()
}

// writeRecords writes records, one per line (recordWriter).
func writeRecords(w io.Writer, records []any) error {
	rw := newRecordWriter(w)
	rw.add(records...)
	return rw.close()
}

// recordWriter encodes records one per line, and writes them in chunks of
// about recordChunk bytes, each a whole number of lines: a report of every
// site with its stack (--detail --top 0) ran to 590 MB, and held in one
// buffer it doubled memtrace's peak RSS (2.3 GB on a Python script). After
// an error it writes nothing more; close returns the first.
type recordWriter struct {
	w   io.Writer
	b   bytes.Buffer
	enc *json.Encoder
	err error
}

// recordChunk is how many bytes of NDJSON a recordWriter gathers per write.
const recordChunk = 1 << 20

func newRecordWriter(w io.Writer) *recordWriter {
	rw := &recordWriter{w: w}
	rw.enc = json.NewEncoder(&rw.b)
	// C++ names are full of '<', '>' and '&'; HTML escaping would turn them
	// into \u003c and friends for no benefit outside a browser.
	rw.enc.SetEscapeHTML(false)
	return rw
}

func (rw *recordWriter) add(records ...any) {
	for _, r := range records {
		if rw.err != nil {
			return
		}
		if err := rw.enc.Encode(r); err != nil {
			rw.err = fmt.Errorf("encode json report: %w", err)
			return
		}
		if rw.b.Len() >= recordChunk {
			rw.flush()
		}
	}
}

func (rw *recordWriter) flush() {
	if rw.err != nil || rw.b.Len() == 0 {
		return
	}
	if _, err := rw.w.Write(rw.b.Bytes()); err != nil {
		rw.err = fmt.Errorf("write json report: %w", err)
	}
	rw.b.Reset()
}

// close writes what is left, and returns the first error.
func (rw *recordWriter) close() error {
	if rw.err == nil {
		rw.flush()
	}
	return rw.err
}

func newProcessRecord(p rankedProcess, t uint64, final bool) processRecord {
	return processRecord{
		Type:           typeProcess,
		PID:            p.PID,
		Comm:           p.Comm,
		LiveBytes:      p.Heap.LiveBytes,
		LiveAllocs:     p.Heap.LiveAllocs,
		Allocs:         p.Heap.Allocs,
		AllocBytes:     p.Heap.AllocBytes,
		Frees:          p.Heap.Frees,
		FreedBytes:     p.Heap.FreedBytes,
		PeakLiveBytes:  p.PeakLiveBytes,
		UnmatchedFrees: p.UnmatchedFrees,
		LostEvents:     p.LostEvents,
		Final:          final,
		Exited:         p.Exited,
		TimeNS:         t,
		Mmap: mmapTotals{
			LiveBytes:     p.Mapped.LiveBytes,
			LiveRegions:   p.Mapped.LiveAllocs,
			Maps:          p.Mapped.Allocs,
			MappedBytes:   p.Mapped.AllocBytes,
			Unmaps:        p.Mapped.Frees,
			UnmappedBytes: p.Mapped.FreedBytes,
			PeakLiveBytes: p.PeakMappedLiveBytes,
			mappingState:  newMappingState(p.MappedState),
		},
		ExitTimeNS: exitTime(p),
		Rates:      rateRecords(p.Rates),
		Footprint:  newFootprintRecord(p.ProcessSnapshot),
		Resident:   newProcessResident(p.Resident),
	}
}

func newProcessResident(r *aggregate.ResidentSnapshot) processResident {
	if r == nil {
		return processResident{}
	}
	return processResident{Bytes: r.Bytes, BytesStderr: roundStderr(r.Stderr), Pages: r.Pages,
		SampleBytes: r.SampleBytes, CheckedNS: r.CheckedNS}
}

// exitTime is the process's exit time, or 0 while it runs, so the
// documented meaning ("0 unless exited") holds whatever the aggregate left
// in the field.
func exitTime(p rankedProcess) uint64 {
	if !p.Exited {
		return 0
	}
	return p.ExitTime
}

// newCallsiteRecord resolves the site and fills its record. Unresolved
// parts stay empty (line 0) rather than carrying the text report's
// "[unknown]": a script should test for "", not for a display string.
func newCallsiteRecord(pid uint32, s aggregate.SiteSnapshot, sym Symbolizer, t uint64, o Options) callsiteRecord {
	final := o.Final
	f := resolve(sym, pid, s.Address)
	offset := ""
	if f.Module != "" {
		offset = hex(f.Offset)
	}
	var stack []stackFrame
	var truncated *bool
	if o.Stacks != nil {
		stack, truncated = stackRecord(o.Stacks.Stack(pid, s))
	}
	var leaf symbolize.Frame
	leafAddr := ""
	if s.Leaf != 0 && s.Leaf != s.Address {
		leaf, leafAddr = resolve(sym, pid, s.Leaf), hex(s.Leaf)
	}
	return callsiteRecord{
		BeforeTable:    s.BeforeTable,
		LeafFunction:   leaf.Function,
		LeafFile:       leaf.File,
		LeafLine:       leaf.Line,
		LeafModule:     leaf.Module,
		LeafAddress:    leafAddr,
		Stack:          stack,
		StackTruncated: truncated,
		Type:           typeCallsite,
		PID:            pid,
		Category:       s.Category.String(),
		Function:       f.Function,
		File:           f.File,
		Line:           f.Line,
		Module:         f.Module,
		Address:        hex(s.Address),
		LiveBytes:      s.LiveBytes,
		LiveAllocs:     s.LiveAllocs,
		Allocs:         s.Allocs,
		AllocBytes:     s.AllocBytes,
		Frees:          s.Frees,
		FreedBytes:     s.FreedBytes,
		Final:          final,
		Offset:         offset,
		TimeNS:         t,
		Rates:          rateRecords(s.Rates),
		Inlined:        inlineRecord(f.Inlined),
		Python:         f.Python,
		mappingState:   newMappingState(s.Mapping),
		ManagedHeap:    mappedHeap(f, s.Category),
	}
}

// inlineRecord is a frame's inline chain for JSON, [] when there is none.
func inlineRecord(in []symbolize.InlineFrame) []inlineFrame {
	out := make([]inlineFrame, 0, len(in))
	for _, f := range in {
		out = append(out, inlineFrame{Function: f.Function, File: f.File, Line: f.Line})
	}
	return out
}
