package report

import (
	"bytes"
	"math"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// Sampled mode (aggregate.Snapshot.SampleBytes > 0): heap figures are
// estimates from samples, except a process's allocation calls and bytes,
// which the probes count exactly (CountsExact). Text marks estimates with
// "~" (in a sentence, before the figure; in a table, before the column's
// header, so that --raw cells stay plain numbers) and gives the live
// bytes' standard error after "±". JSON says "sampled": true and carries
// "live_bytes_stderr".

// estMark is the mark of an estimated figure.
const estMark = "~"

// samplingLine says how figures were sampled, for the report's top.
func samplingLine(n uint64, raw bool) string {
	return "sampled: 1 sample per " + byteText(n, raw) + " allocated on average; " +
		estMark + " marks an estimate, ± its standard error (docs/json.md, Sampling)"
}

// stderrText is a standard error in bytes, rounded to a whole byte.
func stderrText(se float64, raw bool) string {
	return byteText(roundStderr(se), raw)
}

func roundStderr(se float64) uint64 {
	if !(se > 0) || math.IsInf(se, 0) {
		return 0
	}
	return uint64(math.Round(se))
}

// writeSampledHeap prints a sampled process's heap lines: what is
// estimated is marked, and the live bytes carry their standard error.
func writeSampledHeap(b *bytes.Buffer, p rankedProcess, raw bool) {
	h := p.Heap
	line(b, "live:", "%s%s ± %s in %s%s, peak live %s%s", estMark, byteText(h.LiveBytes, raw),
		stderrText(p.LiveBytesStderr, raw), estMark, count(h.LiveAllocs, "block"), estMark, byteText(p.PeakLiveBytes, raw))
	mark := ""
	if !p.CountsExact {
		mark = estMark
	}
	exact := ""
	if p.CountsExact {
		exact = " (exact)"
	}
	line(b, "allocated:", "%s%s in %s%s%s", mark, byteText(h.AllocBytes, raw), mark, count(h.Allocs, "call"), exact)
	line(b, "freed:", "%s%s in %s%s (of blocks allocated while traced)", estMark, byteText(h.FreedBytes, raw), estMark, count(h.Frees, "block"))
}

// estimateHeader marks the estimated columns of a heap site table and adds
// the live bytes' standard error after LIVE.
func estimateHeader(cols []any, c aggregate.Category, o Options) []any {
	if o.sampleBytes == 0 || c != aggregate.Heap {
		return cols
	}
	out := make([]any, 0, len(cols)+1)
	for i, col := range cols {
		if i < 5 {
			col = estMark + col.(string)
		}
		out = append(out, col)
		if i == 0 {
			out = append(out, "± LIVE")
		}
	}
	return out
}

// estimateAlignment goes with estimateHeader.
func estimateAlignment(a tw.CellAlignment, c aggregate.Category, o Options) tw.CellAlignment {
	if o.sampleBytes == 0 || c != aggregate.Heap {
		return a
	}
	pc := a.PerColumn
	return tw.CellAlignment{PerColumn: append(append(append([]tw.Align{}, pc[:1]...), tw.AlignRight), pc[1:]...)}
}

// estimateRow adds the standard error cell after LIVE.
func estimateRow(row []string, s aggregate.SiteSnapshot, c aggregate.Category, o Options) []string {
	if o.sampleBytes == 0 || c != aggregate.Heap {
		return row
	}
	return append(append(append([]string{}, row[:1]...), byteCell(roundStderr(s.LiveBytesStderr), o.Raw)), row[1:]...)
}

// fillProcessSampling sets a process record's sampled-mode fields.
func fillProcessSampling(r *processRecord, p rankedProcess, n uint64) {
	r.Sampled, r.SampleBytes = n > 0, n
	if n > 0 {
		r.LiveBytesStderr = roundStderr(p.LiveBytesStderr)
	}
}

// fillSiteSampling sets a callsite record's comm and sampled-mode fields:
// heap sites are estimated; mmap sites stay exact (mappings are not sampled).
func fillSiteSampling(r *callsiteRecord, comm string, s aggregate.SiteSnapshot, n uint64) {
	r.Comm = comm
	r.Sampled, r.SampleBytes = n > 0 && s.Category == aggregate.Heap, n
	if r.Sampled {
		r.LiveBytesStderr = roundStderr(s.LiveBytesStderr)
	}
}
