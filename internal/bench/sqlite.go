package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// sqliteScripts: another engineer's workload when it exists, else ours.
var sqliteScripts = []string{"testdata/sqlite/workload.sql", "testdata/bench/sqlite_workload.sql"}

const sqliteTimeout = 5 * time.Minute

// sqlite times `sqlite3 -batch :memory: ".read SCRIPT"` untraced, under memtrace and
// under heaptrack. Wall times include each tool's start-up and final
// report: that is what a user waits for.
func (r *runner) sqlite(ctx context.Context) ([]*Comparison, error) {
	rel := firstExisting(r.root, sqliteScripts...)
	if rel == "" {
		return nil, fmt.Errorf("no sqlite workload: none of %v exists", sqliteScripts)
	}
	// The way the script's author runs it; .read keeps stdin out of the picture.
	read := ".read '" + filepath.Join(r.root, rel) + "'"
	c := &Comparison{ID: "sqlite", Title: "sqlite3 -batch :memory: \".read " + rel + "\": wall time", Unit: "s", Baseline: rowUntraced,
		Notes: []string{"wall time of the whole command, tool start-up and final report included"}}
	sq := tool("sqlite3")
	noSqlite := notInstalled("sqlite3")
	orSqlite := func(why string) string {
		if noSqlite != "" {
			return noSqlite
		}
		return why
	}
	wall := func(o output, err error) ([]float64, error) {
		return []float64{o.wall.Seconds()}, err
	}
	args := []string{"-batch", "-bail", ":memory:", read}
	vs := []workloadVariant{
		{name: rowUntraced, skip: noSqlite, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			v, err := wall(run(ctx, sqliteTimeout, sq, args...))
			return v, nil, err
		}},
		{name: memtraceModes[0].name, skip: orSqlite(r.noBPF), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			trace := filepath.Join(r.tmp, "sqlite.ndjson")
			defer os.Remove(trace)
			v, err := wall(run(ctx, sqliteTimeout, r.memtrace, append([]string{"--json", "-o", trace, "--", sq}, args...)...))
			if err != nil {
				return nil, nil, err
			}
			sum, err := readTraceSummary(trace)
			return v, &sum, err
		}},
		{name: rowHeaptrack, skip: orSqlite(notInstalled("heaptrack")), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			data := filepath.Join(r.tmp, "sqlite-heaptrack")
			defer removeGlob(data + "*")
			v, err := wall(run(ctx, sqliteTimeout, "heaptrack", append([]string{"-o", data, sq}, args...)...))
			return v, nil, err
		}},
	}
	r.alternate(ctx, []*Comparison{c}, vs)
	return []*Comparison{c}, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
