package report

import (
	"bytes"
	"fmt"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// The report's parts about time: the peak snapshot (aggregate.PeakSnapshot)
// and the marks the program set (--mark).

const (
	typePeak         = "peak"
	typePeakCallsite = "peak_callsite"
	typeMark         = "mark"
)

// peakRecord is a process's peak snapshot: peak_live_bytes -
// tolerance_bytes <= live_bytes <= peak_live_bytes. Its peak_callsite
// records follow it.
type peakRecord struct {
	Type           string `json:"type"`
	PID            uint32 `json:"pid"`
	Comm           string `json:"comm"`
	TimeNS         uint64 `json:"time_ns"`
	LiveBytes      uint64 `json:"live_bytes"`
	PeakLiveBytes  uint64 `json:"peak_live_bytes"`
	ToleranceBytes uint64 `json:"tolerance_bytes"`
	Snapshots      uint64 `json:"snapshots"`
	Final          bool   `json:"final"`
	// Sampled mode (estimate.go): live_bytes and peak_live_bytes are
	// estimates; live_bytes' standard error at the snapshot.
	Sampled         bool   `json:"sampled"`
	SampleBytes     uint64 `json:"sample_bytes"`
	LiveBytesStderr uint64 `json:"live_bytes_stderr"`
}

// markRecord is one mark: the program called a --mark function.
type markRecord struct {
	Type   string `json:"type"`
	PID    uint32 `json:"pid"`
	Label  string `json:"label"`
	Seq    uint64 `json:"seq"`
	TimeNS uint64 `json:"time_ns"`
}

// MarkRecord is the NDJSON record of m, as written when a mark is seen.
func MarkRecord(m aggregate.Mark) any {
	return markRecord{Type: typeMark, PID: m.PID, Label: m.Label, Seq: m.Seq, TimeNS: m.Time}
}

// WriteMark writes m's record as one NDJSON line.
func WriteMark(w interface{ Write([]byte) (int, error) }, m aggregate.Mark) error {
	return writeRecords(w, []any{MarkRecord(m)})
}

// markRecords lists the marks of the reported processes (in a dump: those
// of its epoch).
func markRecords(s aggregate.Snapshot, procs []rankedProcess, e *Epoch) []any {
	keep := map[uint32]bool{}
	for _, p := range procs {
		keep[p.PID] = true
	}
	return markRecordsOf(s, keep, e)
}

// markRecordsOf lists the marks of the processes in keep.
func markRecordsOf(s aggregate.Snapshot, keep map[uint32]bool, e *Epoch) []any {
	marks := s.Marks
	if e != nil && e.Marks <= len(marks) {
		marks = marks[e.Marks:]
	}
	var out []any
	for _, m := range marks {
		if keep[m.PID] {
			out = append(out, MarkRecord(m))
		}
	}
	return out
}

// peakSites are the peak snapshot's sites ranked by live bytes then, cut
// to o.Top.
func peakSites(pk *aggregate.PeakSnapshot, o Options) []aggregate.SiteSnapshot {
	o.Sort = SortLive
	return topSites(append([]aggregate.SiteSnapshot(nil), pk.Sites...), o)
}

// peakRecords are a process's peak record and its peak_callsite records.
func peakRecords(p rankedProcess, sym Symbolizer, o Options) []any {
	pk := p.Peak
	if pk == nil {
		return nil
	}
	r := peakRecord{Type: typePeak, PID: p.PID, Comm: p.Comm, TimeNS: pk.Time, LiveBytes: pk.LiveBytes,
		PeakLiveBytes: p.PeakLiveBytes, ToleranceBytes: pk.Tolerance, Snapshots: pk.Snapshots, Final: o.Final}
	if p.SampleBytes > 0 {
		r.Sampled, r.SampleBytes, r.LiveBytesStderr = true, p.SampleBytes, roundStderr(pk.LiveBytesStderr)
	}
	out := []any{r}
	for _, site := range peakSites(pk, o) {
		cr := newCallsiteRecord(p.PID, site, sym, pk.Time, o)
		cr.Type = typePeakCallsite
		fillSiteSampling(&cr, p.Comm, site, p.SampleBytes) // comm, and estimates marked (estimate.go)
		fillSiteJVM(&cr, p, site)                          // a JVM's category (jvm.go)
		out = append(out, cr)
	}
	return out
}

// peakLine says when a process's kept snapshot was taken and what it
// held, its figures marked as estimates in sampled mode.
func peakLine(p aggregate.ProcessSnapshot, raw bool) string {
	pk := p.Peak
	mark, se := "", ""
	if p.SampleBytes > 0 {
		mark, se = estMark, " ± "+stderrText(pk.LiveBytesStderr, raw)
	}
	return fmt.Sprintf("at the peak, t=%s: live %s%s%s, within %s of the peak %s%s (%s taken)",
		monotonicSeconds(pk.Time), mark, byteText(pk.LiveBytes, raw), se, byteText(pk.Tolerance, raw),
		mark, byteText(p.PeakLiveBytes, raw), count(pk.Snapshots, "snapshot"))
}

// writePeakText prints the "at the peak" table of a process.
func writePeakText(b *bytes.Buffer, p rankedProcess, sym Symbolizer, o Options) error {
	pk := p.Peak
	if pk == nil || len(pk.Sites) == 0 {
		return nil
	}
	b.WriteString("\n  " + peakLine(p.ProcessSnapshot, o.Raw) + "\n")
	sites := peakSites(pk, o)
	o.Sort = SortLive
	title := fmt.Sprintf("heap call sites live at the peak (all %d):", len(pk.Sites))
	if len(sites) < len(pk.Sites) {
		title = fmt.Sprintf("heap call sites live at the peak (top %d of %d):", len(sites), len(pk.Sites))
	}
	return writeTitledSites(b, p, aggregate.Heap, sites, title, sym, o)
}

// writeMarksText lists a process's marks.
func writeMarksText(b *bytes.Buffer, s aggregate.Snapshot, pid uint32) {
	first := true
	for _, m := range s.Marks {
		if m.PID != pid {
			continue
		}
		if first {
			b.WriteString("\n  marks:\n")
			first = false
		}
		fmt.Fprintf(b, "    #%d %q at t=%s\n", m.Seq, m.Label, monotonicSeconds(m.Time))
	}
}
