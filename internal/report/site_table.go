package report

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// Column headers per category. Mapped regions get their own words: "blocks"
// and "allocated" would misdescribe mmap calls and would invite adding the
// two tables together, which counts the allocator's own mappings twice.
var (
	heapColumns   = []any{"LIVE", "BLOCKS", "ALLOCATED", "CALLS", "FREED", "FUNCTION", "LOCATION", "MODULE"}
	mappedColumns = []any{"LIVE", "REGIONS", "MAPPED", "MMAPS", "UNMAPPED", "FUNCTION", "LOCATION", "MODULE"}
)

// columnAlignment right-aligns the five figures so magnitudes line up, and
// left-aligns the names.
var columnAlignment = tw.CellAlignment{PerColumn: []tw.Align{
	tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight,
	tw.AlignLeft, tw.AlignLeft, tw.AlignLeft,
}}

// writeSiteTables prints the process's heap call sites, then its mmap call
// sites, each under a title saying how they are ranked and how many are
// shown. Heap comes first: it is what leaks in native code.
func writeSiteTables(b *bytes.Buffer, p rankedProcess, sym Symbolizer, o Options) error {
	if p.heapSites == 0 && p.mappedSites == 0 {
		b.WriteString("  no call sites recorded\n")
		return nil
	}
	if p.heapSites > 0 {
		if err := writeSiteTable(b, p, aggregate.Heap, p.heap, p.heapSites, sym, o); err != nil {
			return err
		}
	}
	if p.mappedSites > 0 {
		if err := writeSiteTable(b, p, aggregate.Mapped, p.mapped, p.mappedSites, sym, o); err != nil {
			return err
		}
	}
	return nil
}

func writeSiteTable(b *bytes.Buffer, p rankedProcess, c aggregate.Category,
	sites []aggregate.SiteSnapshot, total int, sym Symbolizer, o Options) error {
	return writeTitledSites(b, p, c, sites, tableTitle(c, len(sites), total, o.Sort), sym, o)
}

// writeTitledSites prints sites as a table under title.
func writeTitledSites(b *bytes.Buffer, p rankedProcess, c aggregate.Category,
	sites []aggregate.SiteSnapshot, title string, sym Symbolizer, o Options) error {
	b.WriteByte('\n')
	b.WriteString("  " + title + "\n")

	var out bytes.Buffer
	states := showStates(p, c) // mmap sites' COMMITTED and RESIDENT (footprint.go)
	align := statesAlignment(estimateAlignment(siteAlignment(o), c, o), states)
	t := tablewriter.NewTable(&out,
		tablewriter.WithRenderer(renderer.NewBlueprint(plainRendition)),
		tablewriter.WithHeaderAlignmentConfig(jvmSiteAlignment(align, p, c)),
		tablewriter.WithRowAlignmentConfig(jvmSiteAlignment(align, p, c)),
		tablewriter.WithHeaderAutoFormat(tw.Off), // headers are written as shown ("~LIVE" stays whole)
	)
	t.Header(jvmHeader(statesHeader(estimateHeader(siteColumns(c, o), c, o), states), p, c)...) // sampled: marks, ± LIVE (estimate.go); a JVM's categories (jvm.go)
	var stacks [][]string
	for _, s := range sites {
		// Symbolize only what is shown: resolution can read ELF and DWARF.
		f := resolve(sym, p.PID, s.Address)
		if o.Stacks != nil {
			stacks = append(stacks, stackLines(o.Stacks.Stack(p.PID, s)))
		}
		row := []string{
			byteCell(s.LiveBytes, o.Raw),
			strconv.FormatUint(s.LiveAllocs, 10),
			byteCell(s.AllocBytes, o.Raw),
			strconv.FormatUint(s.Allocs, 10),
			byteCell(s.FreedBytes, o.Raw),
			mappedFunctionLabel(f, c),
			locationLabel(f),
			moduleLabel(f),
		}
		row = siteRow(row, s, o) // NET RATE with --sort rate
		row = estimateRow(row, s, c, o)
		row = statesRow(row, s, states, o.Raw)
		row = jvmRow(row, p, s)
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add %s call site %s: %w", c, hex(s.Address), err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render %s call sites: %w", c, err)
	}
	indentTableStacks(b, out.String(), stacks)
	return nil
}

// indentTableStacks is indentTable, each row followed by the rest of its
// stack (--detail: stacks[i] is row i's, from stackLines); no stacks, no
// lines.
func indentTableStacks(b *bytes.Buffer, table string, stacks [][]string) {
	row := -1 // the header
	for l := range strings.Lines(table) {
		l = strings.TrimRight(l, " \n")
		if l == "" {
			continue
		}
		b.WriteString("  " + l + "\n")
		if row >= 0 && row < len(stacks) {
			for _, s := range stacks[row] {
				b.WriteString(s + "\n")
			}
		}
		row++
	}
}

// stackLines prints the frames of a stack after its first (the row itself),
// callers last, and says where it stops short.
func stackLines(st callstack.Stack) []string {
	var out []string
	for i, f := range st.Frames {
		if i > 0 {
			loc := locationLabel(f)
			out = append(out, fmt.Sprintf("%s<- %s  %s  %s", stackIndent, functionLabel(f), loc, moduleLabel(f)))
		}
		out = append(out, inlineLines(f)...)
	}
	if st.Truncated {
		out = append(out, stackIndent+"<- ... (truncated: no frame pointer or depth limit)")
	}
	return out
}

// inlineLines prints the rest of a frame's inline chain, after the
// inlined function its own line names: the functions it was inlined into,
// each at the line of the inlined call, the last being the frame's
// function.
func inlineLines(f symbolize.Frame) []string {
	var out []string
	for i, in := range f.Inlined {
		if i == 0 {
			continue
		}
		name := functionLabel(symbolize.Frame{Function: in.Function, Module: f.Module, Offset: f.Offset})
		if i < len(f.Inlined)-1 {
			name += " (inlined)"
		}
		loc := locationLabel(symbolize.Frame{File: in.File, Line: in.Line})
		out = append(out, fmt.Sprintf("%s<- %s  %s  %s", stackIndent, name, loc, moduleLabel(f)))
	}
	return out
}

// stackIndent puts a stack under its row's FUNCTION column well enough to
// read, without tying it to column widths.
const stackIndent = "        "

// plainRendition draws no borders or rules: columns separated by spaces,
// like ps or top, which reads well in a terminal and stays friendly to grep,
// awk and diff.
var plainRendition = tw.Rendition{
	Borders: tw.BorderNone,
	Symbols: tw.NewSymbols(tw.StyleNone),
	Settings: tw.Settings{
		Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
		Lines:      tw.Lines{ShowHeaderLine: tw.Off},
	},
}

// tableTitle says which sites follow, by what they are ranked, and whether
// some were left out.
func tableTitle(c aggregate.Category, shown, total int, k SortKey) string {
	what := "heap call sites"
	if c == aggregate.Mapped {
		what = "anonymous mmap call sites"
	}
	if shown < total {
		return fmt.Sprintf("%s by %s (top %d of %d):", what, k.describe(c), shown, total)
	}
	return fmt.Sprintf("%s by %s (all %d):", what, k.describe(c), total)
}

// indentTable nests a rendered table under its process and drops the
// padding tablewriter leaves at line ends, which would only make diffs and
// golden files noisy.
func indentTable(b *bytes.Buffer, table string) { indentTableStacks(b, table, nil) }
