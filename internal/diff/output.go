package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// processDiffRecord and callsiteDiffRecord are the NDJSON records of a
// diff (docs/json.md): every figure of NEW and its change since OLD.
type processDiffRecord struct {
	Type string `json:"type"`
	Comm string `json:"comm"`
	deltaFields
}

type callsiteDiffRecord struct {
	Type string `json:"type"`
	Comm string `json:"comm"`
	siteFields
	deltaFields
}

type deltaFields struct {
	LiveBytes          int64 `json:"live_bytes"`
	LiveBytesDelta     int64 `json:"live_bytes_delta"`
	LiveAllocs         int64 `json:"live_allocs"`
	LiveAllocsDelta    int64 `json:"live_allocs_delta"`
	Allocs             int64 `json:"allocs"`
	AllocsDelta        int64 `json:"allocs_delta"`
	AllocBytes         int64 `json:"alloc_bytes"`
	AllocBytesDelta    int64 `json:"alloc_bytes_delta"`
	Frees              int64 `json:"frees"`
	FreesDelta         int64 `json:"frees_delta"`
	FreedBytes         int64 `json:"freed_bytes"`
	FreedBytesDelta    int64 `json:"freed_bytes_delta"`
	PeakLiveBytes      int64 `json:"peak_live_bytes"`
	PeakLiveBytesDelta int64 `json:"peak_live_bytes_delta"`
}

func newDeltaFields(n, d Figures) deltaFields {
	return deltaFields{n.LiveBytes, d.LiveBytes, n.LiveAllocs, d.LiveAllocs, n.Allocs, d.Allocs,
		n.AllocBytes, d.AllocBytes, n.Frees, d.Frees, n.FreedBytes, d.FreedBytes, n.PeakLiveBytes, d.PeakLiveBytes}
}

// WriteJSON writes r as NDJSON: process_diff records, then callsite_diff
// records, then (with access figures) access_process_diff and
// access_diff records, each sorted by the largest change.
func WriteJSON(w io.Writer, r Result) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, p := range r.Processes {
		if err := enc.Encode(processDiffRecord{"process_diff", p.Comm, newDeltaFields(p.New, p.Delta)}); err != nil {
			return err
		}
	}
	for _, s := range r.Sites {
		rec := callsiteDiffRecord{"callsite_diff", s.Comm,
			siteFields{s.Category, s.Function, s.File, s.Line, s.Module, s.Offset}, newDeltaFields(s.New, s.Delta)}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	for _, rec := range r.accessRecords() {
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteText writes r as NMT's summary.diff does: each figure, then its
// change in parentheses. Sites that did not change are left out.
func WriteText(w io.Writer, r Result, raw bool) error {
	var b bytes.Buffer
	for _, p := range r.Processes {
		n, d := p.New, p.Delta
		fmt.Fprintf(&b, "%s\n", textsafe.String(p.Comm))
		fmt.Fprintf(&b, "  live:      %s in %s blocks, peak live %s\n", fig(n.LiveBytes, d.LiveBytes, raw, true),
			fig(n.LiveAllocs, d.LiveAllocs, true, false), fig(n.PeakLiveBytes, d.PeakLiveBytes, raw, true))
		fmt.Fprintf(&b, "  allocated: %s in %s calls\n", fig(n.AllocBytes, d.AllocBytes, raw, true), fig(n.Allocs, d.Allocs, true, false))
		fmt.Fprintf(&b, "  freed:     %s in %s blocks\n", fig(n.FreedBytes, d.FreedBytes, raw, true), fig(n.Frees, d.Frees, true, false))
		first := true
		for _, s := range r.Sites {
			if s.Comm != p.Comm || s.Delta == (Figures{}) {
				continue
			}
			if first {
				b.WriteString("  call sites by change:\n")
				first = false
			}
			fmt.Fprintf(&b, "    live %s, allocated %s in %s calls  %s\n", fig(s.New.LiveBytes, s.Delta.LiveBytes, raw, true),
				fig(s.New.AllocBytes, s.Delta.AllocBytes, raw, true), fig(s.New.Allocs, s.Delta.Allocs, true, false), s.label())
		}
		writeAccessText(&b, r, p.Comm, raw)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// label names a site in a text row: function (module+offset when
// unresolved), file:line, module, and its category unless heap.
func (s SiteKey) label() string {
	loc := s.File
	if s.Line > 0 {
		loc += ":" + strconv.Itoa(s.Line)
	}
	fn := s.Function
	if fn == "" {
		fn = s.Module
		if s.Offset != "" {
			fn += "+" + s.Offset
		}
	}
	cat := ""
	if s.Category != "heap" {
		cat = " [" + s.Category + "]"
	}
	return textsafe.String(fn) + "  " + textsafe.String(loc) + "  " + textsafe.String(s.Module) + textsafe.String(cat)
}

// fig is "value (+change)".
func fig(v, d int64, raw, bytes bool) string {
	sign := "+"
	if d < 0 {
		sign = "-"
	}
	return fmt.Sprintf("%s (%s%s)", amount(v, raw, bytes), sign, amount(abs(d), raw, bytes))
}

func amount(v int64, raw, isBytes bool) string {
	if !isBytes {
		return strconv.FormatInt(v, 10)
	}
	if v < 0 {
		return "-" + report.ByteText(uint64(-v), raw)
	}
	return report.ByteText(uint64(v), raw)
}
