package report

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// SortRate ranks by net bytes per second (allocated − freed) at the
// shortest half-life: what is growing now. Processes rank by their heap net
// rate.
const SortRate SortKey = "rate"

// shortest returns the rates at the shortest half-life, and false when
// there are none.
func shortest(rs []aggregate.RateSnapshot) (aggregate.RateSnapshot, bool) {
	if len(rs) == 0 {
		return aggregate.RateSnapshot{}, false
	}
	best := rs[0]
	for _, r := range rs[1:] {
		if r.HalfLife < best.HalfLife {
			best = r
		}
	}
	return best, true
}

// netRate is the net bytes per second at the shortest half-life, 0 without
// rates.
func netRate(rs []aggregate.RateSnapshot) float64 {
	r, _ := shortest(rs)
	return r.NetBytesPerSec
}

// compareSites orders a before b (negative) when a ranks higher by k.
func (k SortKey) compareSites(a, b aggregate.SiteSnapshot) int {
	switch {
	case k == SortRate:
		return cmp.Compare(netRate(b.Rates), netRate(a.Rates))
	case k.ranksFootprint(): // hostlist.go
		return compareResident(a, b) // footprint.go
	}
	return cmp.Compare(k.value(b.Stats), k.value(a.Stats))
}

// compareProcesses orders a before b (negative) when a ranks higher by k:
// heap plus mmap figures, or for SortRate the heap net rate.
func (k SortKey) compareProcesses(a, b aggregate.ProcessSnapshot) int {
	switch {
	case k == SortRate:
		return cmp.Compare(netRate(b.Rates), netRate(a.Rates))
	case k.ranksFootprint():
		return cmp.Compare(footprintValue(b, k), footprintValue(a, k)) // hostlist.go
	}
	return cmp.Compare(k.value(b.Heap)+k.value(b.Mapped), k.value(a.Heap)+k.value(a.Mapped))
}

// halfLifeText prints a half-life as flags take it: "1s", "100s", "500ms".
func halfLifeText(d time.Duration) string {
	switch {
	case d > 0 && d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d > 0 && d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}

// rateBytes formats a signed bytes-per-second figure: human units, or the
// exact integer (rounded) with raw.
func rateBytes(v float64, raw bool) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	n := uint64(math.Round(v))
	if n == 0 {
		sign = ""
	}
	if raw {
		return sign + strconv.FormatUint(n, 10)
	}
	return sign + humanBytes(n)
}

// rateCount formats calls per second with one decimal.
func rateCount(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if s == "-0.0" {
		s = "0.0"
	}
	return s
}

// writeRates prints a process's decaying averages, one line per half-life,
// as an aligned block under the header's other figures.
func writeRates(b *bytes.Buffer, rs []aggregate.RateSnapshot, raw bool) {
	if len(rs) == 0 {
		return
	}
	rows := [][]string{{"half-life", "allocated/s", "freed/s", "net/s", "allocs/s", "frees/s"}}
	for _, r := range rs {
		rows = append(rows, []string{
			halfLifeText(r.HalfLife),
			rateBytes(r.AllocBytesPerSec, raw),
			rateBytes(r.FreedBytesPerSec, raw),
			rateBytes(r.NetBytesPerSec, raw),
			rateCount(r.AllocsPerSec),
			rateCount(r.FreesPerSec),
		})
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for i, row := range rows {
		label := ""
		if i == 0 {
			label = "rates:"
		}
		var l strings.Builder
		for j, c := range row {
			if j > 0 {
				l.WriteString("  ")
			}
			fmt.Fprintf(&l, "%*s", widths[j], c)
		}
		line(b, label, "%s", l.String())
	}
}

// siteColumns are the headers of a site table: with SortRate a NET RATE column
// (the key) follows FREED/UNMAPPED.
func siteColumns(c aggregate.Category, o Options) []any {
	cols := heapColumns
	if c == aggregate.Mapped {
		cols = mappedColumns
	}
	if o.Sort != SortRate {
		return cols
	}
	return append(append(append([]any{}, cols[:5]...), "NET RATE"), cols[5:]...)
}

// siteAlignment goes with siteColumns.
func siteAlignment(o Options) tw.CellAlignment {
	if o.Sort != SortRate {
		return columnAlignment
	}
	a := columnAlignment.PerColumn
	return tw.CellAlignment{PerColumn: append(append(append([]tw.Align{}, a[:5]...), tw.AlignRight), a[5:]...)}
}

// siteRow adds the NET RATE cell (bytes/s) to a row of figures when
// siteColumns has it.
func siteRow(row []string, s aggregate.SiteSnapshot, o Options) []string {
	if o.Sort != SortRate {
		return row
	}
	cell := rateBytes(netRate(s.Rates), o.Raw)
	if !o.Raw {
		cell += "/s"
	}
	return append(append(append([]string{}, row[:5]...), cell), row[5:]...)
}
