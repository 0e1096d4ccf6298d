package report

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// labelWidth aligns the values of a process header. It is the width of
// "lost events: ", the longest label, so that line reads exactly
// "lost events: N" for people and scripts grepping for it.
const labelWidth = len("lost events: ")

// WriteText writes the human report of s to w: a banner, then for each
// process its totals and tables of its top call sites. The whole report is
// built first and written with one Write, so a failed symbolization or
// table never leaves half a report on the terminal, and periodic reports
// from different goroutines cannot interleave mid-report.
func WriteText(w io.Writer, s aggregate.Snapshot, sym Symbolizer, o Options) error {
	o, err := o.normalized()
	if err != nil {
		return fmt.Errorf("text report: %w", err)
	}
	o.sampleBytes = s.SampleBytes
	if o.Host {
		return writeHostText(w, s, sym, o) // host.go
	}
	var b bytes.Buffer
	procs := rank(s, o)
	lost := runLostEvents(s)

	writeBanner(&b, s.Time, lost, o.Final)
	if s.SampleBytes > 0 {
		b.WriteString(samplingLine(s.SampleBytes, o.Raw) + "\n")
	}
	if len(procs) == 0 {
		b.WriteString("no allocations traced\n")
	}
	for _, p := range procs {
		b.WriteByte('\n')
		writeProcessHeader(&b, p, o.Raw)
		writeManagedHeapsText(&b, managedHeaps(p.ProcessSnapshot, sym), o.Raw) // managed_heaps.go
		if err := writeJVMText(&b, p, o.Raw); err != nil {                     // jvm.go
			return fmt.Errorf("text report for pid %d: %w", p.PID, err)
		}
		if err := writeSiteTables(&b, p, sym, o); err != nil {
			return fmt.Errorf("text report for pid %d: %w", p.PID, err)
		}
		if err := writePeakText(&b, p, sym, o); err != nil { // time.go
			return fmt.Errorf("text report for pid %d: %w", p.PID, err)
		}
		if err := writeResidentText(&b, p.ProcessSnapshot, sym, o); err != nil { // resident.go
			return fmt.Errorf("text report for pid %d: %w", p.PID, err)
		}
		writeMarksText(&b, s, p.PID)
	}
	// Repeat the warning at the end: a long report scrolls the first one
	// out of sight, and the end is what stays on screen.
	if lost > 0 && len(procs) > 0 {
		b.WriteByte('\n')
		writeLostWarning(&b, lost)
	}

	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write text report: %w", err)
	}
	return nil
}

// writeBanner opens a report with its time, so successive periodic reports
// can be told apart, and says loudly when this is the final one.
func writeBanner(b *bytes.Buffer, t, lost uint64, final bool) {
	kind := "report"
	if final {
		kind = "FINAL report"
	}
	fmt.Fprintf(b, "=== memtrace %s at t=%s (monotonic clock) ===\n", kind, monotonicSeconds(t))
	if lost > 0 {
		writeLostWarning(b, lost)
	}
}

func writeLostWarning(b *bytes.Buffer, lost uint64) {
	fmt.Fprintf(b, "WARNING: %d events lost: figures are incomplete\n", lost)
}

// writeProcessHeader prints a process's totals, one figure per line with
// the values aligned. Lost events are always shown, zero included, so a
// reader knows the figures were checked rather than assume they were.
func writeProcessHeader(b *bytes.Buffer, p rankedProcess, raw bool) {
	b.WriteString("pid " + strconv.FormatUint(uint64(p.PID), 10))
	if p.Comm != "" {
		b.WriteString(" " + textsafe.String(p.Comm))
	}
	if p.Exited {
		b.WriteString(" (exited)")
	}
	b.WriteByte('\n')

	h := p.Heap
	if p.SampleBytes > 0 {
		writeSampledHeap(b, p, raw) // estimates, marked (estimate.go)
	} else {
		line(b, "live:", "%s in %s, peak live %s", byteText(h.LiveBytes, raw),
			count(h.LiveAllocs, "block"), byteText(p.PeakLiveBytes, raw))
		line(b, "allocated:", "%s in %s", byteText(h.AllocBytes, raw), count(h.Allocs, "call"))
		unmatched := strconv.FormatUint(p.UnmatchedFrees, 10)
		if p.UnmatchedFrees > 0 {
			unmatched += " (blocks allocated before tracing began, inside the allocator itself, or whose event was lost)"
		}
		line(b, "freed:", "%s in %s, unmatched frees: %s", byteText(h.FreedBytes, raw),
			count(h.Frees, "block"), unmatched)
	}

	if hasMapped(p) {
		m := p.Mapped
		line(b, "anon mmap:", "%s live in %s, peak %s; %s mapped by %s; %s unmapped by %s",
			byteText(m.LiveBytes, raw), count(m.LiveAllocs, "region"),
			byteText(p.PeakMappedLiveBytes, raw),
			byteText(m.AllocBytes, raw), count(m.Allocs, "call"),
			byteText(m.FreedBytes, raw), count(m.Frees, "call"))
	}
	writeFootprintText(b, p, raw) // footprint.go

	lostLine := strconv.FormatUint(p.LostEvents, 10)
	if p.LostEvents > 0 {
		lostLine += " (this process's figures are incomplete)"
	}
	line(b, "lost events:", "%s", lostLine)
	writeRates(b, p.Rates, raw) // decaying averages per half-life (rates.go)
}

// hasMapped says whether the process used anonymous mmap at all; most C
// and C++ processes' only mappings come from the allocator itself, and a
// line of zeros would only be noise.
func hasMapped(p rankedProcess) bool {
	return p.Mapped != (aggregate.Stats{}) || p.PeakMappedLiveBytes > 0 || p.mappedSites > 0
}

// line writes one aligned "label: value" line of a process header.
func line(b *bytes.Buffer, label, format string, args ...any) {
	fmt.Fprintf(b, "  %-*s"+format+"\n", append([]any{labelWidth, label}, args...)...)
}

// count is "n thing" with the plural the number calls for.
func count(n uint64, thing string) string {
	s := strconv.FormatUint(n, 10) + " " + thing
	if n != 1 {
		s += "s"
	}
	return s
}
