package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The goals for a big program's unwind tables (node's 98 MB
// binary, 2.7 MB of .eh_frame): built on a first run, read from the cache.
const (
	nodeTablesFirst  = 1000 * time.Millisecond
	nodeTablesCached = 150 * time.Millisecond
	nodeTimeout      = 2 * time.Minute
	// nodeSlack is the wall time memtrace may add to node -e 0 beyond
	// its allocator calls' traps: start-up, tables, the report.
	nodeSlack = 300 * time.Millisecond
	// nodeFloorPairs: mallocfree's pairs per floor measurement.
	nodeFloorPairs = 200_000
)

// Rows of the node section.
const (
	rowMemtraceCached = "memtrace (tables cached)"
	rowMemtraceFirst  = "memtrace (first run: empty cache)"
)

// tablesLoaded matches memtrace -v's line for a target's tables.
var tablesLoaded = regexp.MustCompile(`msg="unwind tables loaded" pid=\d+ files=\d+ took=(\S+)`)

// node times `node -e 0` untraced, under memtrace with its tables cached
// and on a first run (an empty cache directory), and under heaptrack; and
// how long memtrace's -v says the tables took to load, first and cached.
// The command does not wait for the tables (past --tables-wait): the wall
// times show what a user waits for.
func (r *runner) node(ctx context.Context) ([]*Comparison, error) {
	wallC := &Comparison{ID: "node", Title: "node -e 0: wall time", Unit: "s", Baseline: rowUntraced,
		Notes: []string{"wall time of the whole command, tool start-up and final report included",
			"first run: MEMTRACE_CACHE_DIR is a new empty directory each round"}}
	tablesC := &Comparison{ID: "node-tables", Title: "node -e 0: unwind tables loaded (memtrace -v), from the probes' attach", Unit: "ms"}
	targetC := &Comparison{ID: "node-target", Title: "node -e 0: memtrace's wall time against untraced + allocation calls x the three-trap floor + 0.3 s",
		Notes: []string{"floor: empty BPF programs on malloc entry+return and free entry (mallocfree, 1 thread), minus untraced, per pair; measured in this run, after node's rounds",
			rowNodeTraps + ": node itself with an empty program on every probe memtrace places in it (entries, and returns but free's), attached at its exec stop",
			"calls: the allocation calls memtrace counted in node -e 0 (each with its free: one three-trap pair)"}}
	calls := targetC.add(rowNodeCalls)
	node := tool("node")
	noNode := notInstalled("node")
	orNode := func(why string) string {
		if noNode != "" {
			return noNode
		}
		return why
	}
	tabRows := map[string]*Row{}
	for _, name := range []string{rowMemtraceFirst, rowMemtraceCached} {
		if why := orNode(r.noBPF); why != "" {
			tablesC.skip(name, why)
			continue
		}
		tabRows[name] = tablesC.add(name)
	}
	cached := filepath.Join(r.tmp, "node-cache")
	traced := func(name string, cacheDir func() (string, error)) workloadVariant {
		return workloadVariant{name: name, skip: orNode(r.noBPF), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			dir, err := cacheDir()
			if err != nil {
				return nil, nil, err
			}
			trace := filepath.Join(r.tmp, "node.ndjson")
			defer os.Remove(trace)
			o, err := runEnv(ctx, nodeTimeout, []string{"MEMTRACE_CACHE_DIR=" + dir}, r.memtrace,
				"-v", "--json", "-o", trace, "--", node, "-e", "0")
			if err != nil {
				return nil, nil, err
			}
			took, err := tablesTook(o.stderr)
			tabRows[name].record(float64(took.Microseconds())/1000, err)
			sum, err := readTraceSummary(trace)
			if err == nil {
				calls.record(float64(sum.allocs), nil)
			}
			return []float64{o.wall.Seconds()}, &sum, err
		}}
	}
	vs := []workloadVariant{
		{name: rowUntraced, skip: noNode, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			o, err := run(ctx, nodeTimeout, node, "-e", "0")
			return []float64{o.wall.Seconds()}, nil, err
		}},
		traced(rowMemtraceCached, func() (string, error) {
			// The first round fills it: that round's tables were built.
			return cached, nil
		}),
		traced(rowMemtraceFirst, func() (string, error) {
			return os.MkdirTemp(r.tmp, "node-first-")
		}),
		{name: rowNodeTraps, skip: orNode(r.noBPF), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			took, err := r.nodeUnderTraps(ctx, node, "-e", "0")
			return []float64{took.Seconds()}, nil, err
		}},
		{name: rowHeaptrack, skip: orNode(notInstalled("heaptrack")), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			data := filepath.Join(r.tmp, "node-heaptrack")
			defer removeGlob(data + "*")
			o, err := run(ctx, nodeTimeout, "heaptrack", "-o", data, node, "-e", "0")
			return []float64{o.wall.Seconds()}, nil, err
		}},
	}
	if noNode == "" && r.noBPF == "" {
		// Warm the cache, so that every "cached" round reads it.
		if _, err := runEnv(ctx, nodeTimeout, []string{"MEMTRACE_CACHE_DIR=" + cached}, r.memtrace,
			"-o", os.DevNull, "--", node, "-e", "0"); err != nil {
			return nil, fmt.Errorf("warm the cache: %w", err)
		}
	}
	r.alternate(ctx, []*Comparison{wallC}, vs)
	for name, row := range tabRows {
		row.summarize()
		if row.Status != StatusOK {
			continue
		}
		goal := nodeTablesCached
		if name == rowMemtraceFirst {
			goal = nodeTablesFirst
		}
		row.Target = fmt.Sprintf("<= %d ms", goal.Milliseconds())
		row.Met = ptr(row.Median <= float64(goal.Milliseconds()))
	}
	if noNode != "" || r.noBPF != "" {
		targetC.Rows = nil
		targetC.skip(rowNodeFloor, orNode(r.noBPF))
		return []*Comparison{wallC, tablesC, targetC}, nil
	}
	floor := targetC.add(rowNodeFloor)
	for round := range r.cfg.Rounds {
		r.logf("node: round %d/%d: the three-trap floor", round+1, r.cfg.Rounds)
		floor.record(r.trapFloor(ctx))
	}
	nodeTarget(targetC, wallC)
	symsC, err := r.nodeSymbols(ctx)
	if err != nil {
		return nil, err
	}
	return []*Comparison{wallC, tablesC, targetC, symsC}, nil
}

// nodeSymbols reads symbolize's BenchmarkFunctionSymbols: node's function
// symbols read, as memtrace reads them to name its call sites (on a core
// of its own while node runs, and for the report).
func (r *runner) nodeSymbols(ctx context.Context) (*Comparison, error) {
	c := &Comparison{ID: "node-symbols", Title: "node's function symbols read (symbolize.BenchmarkFunctionSymbols)", Unit: "ms",
		Notes: []string{"alloc MB: all that a read allocates, the table it keeps included"}}
	bin, err := r.testBinary(ctx, "symbolize")
	if err != nil {
		return nil, err
	}
	took, alloc := c.add("read"), c.add("alloc MB")
	for round := range r.cfg.Rounds {
		r.logf("node: round %d/%d: function symbols", round+1, r.cfg.Rounds)
		m, err := goBench(ctx, bin, "^BenchmarkFunctionSymbols$", "3x")
		if err != nil {
			took.record(0, err)
			alloc.record(0, err)
			continue
		}
		ns, err := metric(m, "BenchmarkFunctionSymbols", "ns/op")
		took.record(ns/1e6, err)
		alloc.record(metric(m, "BenchmarkFunctionSymbols", "alloc-MB"))
	}
	took.summarize()
	alloc.summarize()
	return c, nil
}

// Rows of the node-target comparison.
const (
	rowNodeCalls   = "allocation calls (memtrace's count)"
	rowNodeFloor   = "three-trap floor (us per malloc+free pair)"
	rowNodeAllowed = "allowed wall (s): untraced + calls x floor + 0.3 s"
)

// nodeTarget adds to c, which holds the calls and floor rows, the allowed
// wall time and each memtrace row of wall held to it.
func nodeTarget(c, wall *Comparison) {
	calls, floor := c.row(rowNodeCalls), c.row(rowNodeFloor)
	calls.summarize()
	floor.summarize()
	untraced := wall.row(rowUntraced)
	if calls.Status != StatusOK || floor.Status != StatusOK || untraced == nil || untraced.Status != StatusOK {
		c.Notes = append(c.Notes, "no target check: the untraced time, the calls or the floor is missing")
		return
	}
	allowed := untraced.Median + calls.Median*floor.Median/1e6 + nodeSlack.Seconds()
	a := c.add(rowNodeAllowed)
	a.record(allowed, nil)
	a.summarize()
	a.Note = fmt.Sprintf("%.3f s untraced + %.0f calls x %.2f us + %.1f s", untraced.Median, calls.Median, floor.Median, nodeSlack.Seconds())
	for _, name := range []string{rowMemtraceCached, rowMemtraceFirst} {
		w := wall.row(name)
		if w == nil || w.Status != StatusOK {
			continue
		}
		row := c.add(name + ", wall (s)")
		row.Rounds, row.Median, row.Min, row.Max = w.Rounds, w.Median, w.Min, w.Max
		row.Target = fmt.Sprintf("<= %.3f s", allowed)
		row.Met = ptr(w.Median <= allowed)
	}
	for _, name := range []string{rowNodeTraps, rowHeaptrack} {
		if h := wall.row(name); h != nil && h.Status == StatusOK {
			row := c.add(name + ", wall (s)")
			row.Rounds, row.Median, row.Min, row.Max = h.Rounds, h.Median, h.Min, h.Max
		}
	}
}

// trapFloor is what the three traps cost a malloc+free pair here and now,
// in microseconds: mallocfree under empty programs on malloc's entry and
// return and free's entry, less mallocfree untraced.
func (r *runner) trapFloor(ctx context.Context) (float64, error) {
	j := microJob{threads: 1, pairs: nodeFloorPairs}
	if r.cfg.Quick {
		j.pairs = 20_000
	}
	u, err := r.untraced(ctx, j)
	if err != nil {
		return 0, err
	}
	f, err := r.emptyProbes(ctx, j, true, true)
	if err != nil {
		return 0, err
	}
	return (f.nsPerPair - u.nsPerPair) / 1000, nil
}

// tablesTook is the time of memtrace -v's "unwind tables loaded" line
// (the traced command's own attach: the first such line).
func tablesTook(stderr string) (time.Duration, error) {
	m := tablesLoaded.FindStringSubmatch(stderr)
	if m == nil {
		return 0, fmt.Errorf("no \"unwind tables loaded\" line in memtrace -v's output%s", tail(lastLines(stderr, 5)))
	}
	return time.ParseDuration(m[1])
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
