package report

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// A JVM's heap by NMT category (aggregate.ProcessSnapshot.JVM): a table
// under the process's totals, a last column in its heap call sites, and
// the same in JSON.

// jvmColumn names the heap table's last column in a JVM.
const jvmColumn = "NMT CATEGORY"

// noCategory labels the heap no category claims: allocations the JVM's
// code (or a library's) made without os::malloc.
const noCategory = "(no category)"

// writeJVMText prints the process's heap by NMT category, if it is a JVM.
func writeJVMText(b *bytes.Buffer, p rankedProcess, raw bool) error {
	if p.JVM == nil {
		return nil
	}
	b.WriteString("\n  JVM heap by NMT category (os::malloc's MEMFLAGS):\n")
	var out bytes.Buffer
	t := tablewriter.NewTable(&out,
		tablewriter.WithRenderer(renderer.NewBlueprint(plainRendition)),
		tablewriter.WithHeaderAlignmentConfig(jvmAlignment),
		tablewriter.WithRowAlignmentConfig(jvmAlignment),
		tablewriter.WithHeaderAutoFormat(tw.Off),
	)
	t.Header("LIVE", "BLOCKS", "ALLOCATED", "CALLS", "FREED", "CATEGORY")
	for _, c := range p.JVM {
		if err := t.Append([]string{byteCell(c.LiveBytes, raw), strconv.FormatUint(c.LiveAllocs, 10),
			byteCell(c.AllocBytes, raw), strconv.FormatUint(c.Allocs, 10), byteCell(c.FreedBytes, raw),
			jvmLabel(c.Name)}); err != nil {
			return fmt.Errorf("add NMT category %q: %w", c.Name, err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render NMT categories: %w", err)
	}
	indentTable(b, out.String())
	return nil
}

var jvmAlignment = tw.CellAlignment{PerColumn: []tw.Align{
	tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft,
}}

func jvmLabel(name string) string {
	if name == "" {
		return noCategory
	}
	return textsafe.String(name)
}

// jvmHeader, jvmAlignment and jvmRow add the NMT CATEGORY column to a
// JVM's heap call sites.
func jvmHeader(cols []any, p rankedProcess, c aggregate.Category) []any {
	if p.JVM == nil || c != aggregate.Heap {
		return cols
	}
	return append(append([]any{}, cols...), jvmColumn)
}

func jvmSiteAlignment(a tw.CellAlignment, p rankedProcess, c aggregate.Category) tw.CellAlignment {
	if p.JVM == nil || c != aggregate.Heap {
		return a
	}
	return tw.CellAlignment{PerColumn: append(append([]tw.Align{}, a.PerColumn...), tw.AlignLeft)}
}

func jvmRow(row []string, p rankedProcess, s aggregate.SiteSnapshot) []string {
	if p.JVM == nil || s.Category != aggregate.Heap {
		return row
	}
	return append(row, jvmLabel(s.JVMCategory))
}

// jvmCategoryRecord is one NMT category's heap in a JVM's process record.
type jvmCategoryRecord struct {
	Name       string `json:"name"`
	LiveBytes  uint64 `json:"live_bytes"`
	LiveAllocs uint64 `json:"live_allocs"`
	Allocs     uint64 `json:"allocs"`
	AllocBytes uint64 `json:"alloc_bytes"`
	Frees      uint64 `json:"frees"`
	FreedBytes uint64 `json:"freed_bytes"`
}

// fillProcessJVM sets a JVM's process record's jvm_categories.
func fillProcessJVM(r *processRecord, p rankedProcess) {
	if p.JVM == nil {
		return
	}
	r.JVMCategories = make([]jvmCategoryRecord, 0, len(p.JVM))
	for _, c := range p.JVM {
		r.JVMCategories = append(r.JVMCategories, jvmCategoryRecord{Name: c.Name,
			LiveBytes: c.LiveBytes, LiveAllocs: c.LiveAllocs, Allocs: c.Allocs,
			AllocBytes: c.AllocBytes, Frees: c.Frees, FreedBytes: c.FreedBytes})
	}
}

// fillSiteJVM sets a JVM's heap callsite record's jvm_category.
func fillSiteJVM(r *callsiteRecord, p rankedProcess, s aggregate.SiteSnapshot) {
	if p.JVM == nil || s.Category != aggregate.Heap {
		return
	}
	name := s.JVMCategory
	r.JVMCategory = &name
}
