package report

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/aggregate"
)

// Resident memory by who made it resident (aggregate.ResidentSnapshot):
// estimates from sampled write faults, each with its standard error.

const typeResident = "resident"

// residentRecord is one charged call site's resident anonymous memory.
type residentRecord struct {
	Type     string `json:"type"`
	PID      uint32 `json:"pid"`
	Comm     string `json:"comm"`
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Module   string `json:"module"`
	Address  string `json:"address"`
	// ResidentBytes estimates the bytes resident that the site made
	// resident; ResidentBytesStderr is its standard error.
	ResidentBytes       uint64 `json:"resident_bytes"`
	ResidentBytesStderr uint64 `json:"resident_bytes_stderr"`
	// Sampled counts the sampled pages behind the estimate; SampleBytes
	// is the sampling mean.
	Sampled     uint64 `json:"sampled"`
	SampleBytes uint64 `json:"sample_bytes"`
	Final       bool   `json:"final"`
	TimeNS      uint64 `json:"time_ns"`
}

// residentSites are the sites shown: the top o.Top (0: all).
func residentSites(r *aggregate.ResidentSnapshot, o Options) []aggregate.ResidentSite {
	if o.Top > 0 && len(r.Sites) > o.Top {
		return r.Sites[:o.Top]
	}
	return r.Sites
}

// residentRecords are p's resident records, one per shown site.
func residentRecords(p aggregate.ProcessSnapshot, sym Symbolizer, t uint64, o Options) []any {
	r := p.Resident
	if r == nil {
		return nil
	}
	var out []any
	for _, s := range residentSites(r, o) {
		f := resolve(sym, p.PID, s.Address)
		out = append(out, residentRecord{
			Type: typeResident, PID: p.PID, Comm: p.Comm,
			Function: f.Function, File: f.File, Line: f.Line, Module: f.Module, Address: hex(s.Address),
			ResidentBytes: s.Bytes, ResidentBytesStderr: roundStderr(s.Stderr),
			Sampled: s.Pages, SampleBytes: r.SampleBytes, Final: o.Final, TimeNS: t,
		})
	}
	return out
}

// writeResidentText prints p's resident section: the total, then the top
// sites by resident bytes.
func writeResidentText(b *bytes.Buffer, p aggregate.ProcessSnapshot, sym Symbolizer, o Options) error {
	r := p.Resident
	if r == nil {
		return nil
	}
	b.WriteByte('\n')
	fmt.Fprintf(b, "  resident by who made it resident (1 write fault sampled per %s of faults): %s%s ± %s in %s\n",
		byteText(r.SampleBytes, o.Raw), estMark, byteText(r.Bytes, o.Raw), stderrText(r.Stderr, o.Raw),
		count(r.Pages, "sampled page"))
	sites := residentSites(r, o)
	if len(sites) == 0 {
		return nil
	}
	var out bytes.Buffer
	right := tw.CellAlignment{PerColumn: []tw.Align{tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft, tw.AlignLeft, tw.AlignLeft}}
	t := tablewriter.NewTable(&out,
		tablewriter.WithRenderer(renderer.NewBlueprint(plainRendition)),
		tablewriter.WithHeaderAlignmentConfig(right),
		tablewriter.WithRowAlignmentConfig(right),
		tablewriter.WithHeaderAutoFormat(tw.Off),
	)
	t.Header(estMark+"RESIDENT", "± RESIDENT", "PAGES", "FUNCTION", "FILE:LINE", "MODULE")
	for _, s := range sites {
		f := resolve(sym, p.PID, s.Address)
		row := []string{byteCell(s.Bytes, o.Raw), byteCell(roundStderr(s.Stderr), o.Raw),
			strconv.FormatUint(s.Pages, 10), functionLabel(f), locationLabel(f), moduleLabel(f)}
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add resident site %s: %w", hex(s.Address), err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render resident sites: %w", err)
	}
	indentTable(b, out.String())
	return nil
}
