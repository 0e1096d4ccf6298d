package report

import (
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// rateRecord is one half-life's decaying averages in a process or callsite
// record's "rates" (docs/json.md). Unlike every other figure these are not
// integers: they are averages per second, and net can be negative.
type rateRecord struct {
	HalfLifeS      decimal `json:"half_life_s"`
	AllocBytesPerS decimal `json:"alloc_bytes_per_s"`
	FreeBytesPerS  decimal `json:"free_bytes_per_s"`
	NetBytesPerS   decimal `json:"net_bytes_per_s"`
	AllocsPerS     decimal `json:"allocs_per_s"`
	FreesPerS      decimal `json:"frees_per_s"`
}

// rateRecords converts rates for JSON; never nil, so "rates" is always an
// array ([] when no rates are kept).
func rateRecords(rs []aggregate.RateSnapshot) []rateRecord {
	out := make([]rateRecord, 0, len(rs))
	for _, r := range rs {
		out = append(out, rateRecord{
			HalfLifeS:      decimal{r.HalfLife.Seconds(), -1},
			AllocBytesPerS: decimal{r.AllocBytesPerSec, 3},
			FreeBytesPerS:  decimal{r.FreedBytesPerSec, 3},
			NetBytesPerS:   decimal{r.NetBytesPerSec, 3},
			AllocsPerS:     decimal{r.AllocsPerSec, 3},
			FreesPerS:      decimal{r.FreesPerSec, 3},
		})
	}
	return out
}

// decimal is a JSON number in plain decimal notation, never in exponent
// form, rounded to prec decimals (-1: as many as needed to be exact), with
// trailing zeros dropped: 10485760, 0.5, -3.25. NaN and infinities, which
// JSON cannot carry, are written as 0.
type decimal struct {
	v    float64
	prec int
}

func (d decimal) MarshalJSON() ([]byte, error) {
	v := d.v
	if v != v || v > 1e300 || v < -1e300 {
		v = 0
	}
	s := strconv.FormatFloat(v, 'f', d.prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return []byte(s), nil
}
