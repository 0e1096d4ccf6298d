package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

const blocksTimeout = 5 * time.Minute

// blocksCount is the blocks program's size: 5 million blocks, half live at
// the end; the tiny run that gives memtrace's fixed memory makes 1000.
const (
	blocksCount = 5_000_000
	blocksTiny  = 1000
)

// peakRSSLine is memtrace -v's last word on its own memory (session's logEvents).
var peakRSSLine = regexp.MustCompile(`msg="memtrace memory" peak_rss_bytes=(\d+)`)

// blocks times testdata/bench/blocks.c (5 million small blocks, half of
// them freed) untraced, under memtrace and under heaptrack, wall time of
// the whole command; and memtrace's memory per live block: its peak RSS
// less that of a 1000-block run, over the difference in live blocks.
func (r *runner) blocks(ctx context.Context) ([]*Comparison, error) {
	bin, err := compileC(ctx, r.root, r.tmp, "blocks")
	if err != nil {
		return nil, err
	}
	n := int64(blocksCount)
	if r.cfg.Quick {
		n = 200_000
	}
	count := strconv.FormatInt(n, 10)
	wall := &Comparison{ID: "blocks", Title: fmt.Sprintf("blocks: %d blocks of 16-79 bytes, every second one freed: wall time", n), Unit: "s", Baseline: rowUntraced,
		Notes: []string{"wall time of the whole command, tool start-up and final report included"}}
	mem := &Comparison{ID: "blocks-memory", Title: "blocks: memtrace's memory per live block (peak RSS, less a 1000-block run's)", Unit: "B/live-block",
		Notes: []string{"peak RSS from memtrace -v (VmHWM); the 1000-block run's peak (start-up, tables, report) is subtracted"}}
	memRows := map[string]*Row{}
	under := func(name string, args ...string) workloadVariant {
		return workloadVariant{name: name, skip: r.noBPF, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			rss := func(blocks string) (output, float64, error) {
				o, err := run(ctx, blocksTimeout, r.memtrace, append(append([]string{"-v", "--json", "-o", os.DevNull}, args...), "--", bin, blocks)...)
				if err != nil {
					return o, 0, err
				}
				m := peakRSSLine.FindStringSubmatch(o.stderr)
				if m == nil {
					return o, 0, fmt.Errorf("memtrace -v logged no peak RSS")
				}
				v, err := strconv.ParseFloat(m[1], 64)
				return o, v, err
			}
			o, big, err := rss(count)
			if err != nil {
				return nil, nil, err
			}
			_, tiny, err := rss(strconv.Itoa(blocksTiny))
			if err != nil {
				return nil, nil, err
			}
			row := memRows[name]
			if row == nil {
				row = mem.add(name)
				memRows[name] = row
			}
			row.record((big-tiny)/float64(n/2-blocksTiny/2), nil)
			return []float64{o.wall.Seconds()}, nil, nil
		}}
	}
	vs := []workloadVariant{
		{name: rowUntraced, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			o, err := run(ctx, blocksTimeout, bin, count)
			return []float64{o.wall.Seconds()}, nil, err
		}},
		under(memtraceModes[0].name),
		// Without the leak check at exit, which reads the heap: tracing alone.
		under("memtrace exact --leak-check=false", "--leak-check=false"),
		under("memtrace sampled 512K", "--sample-bytes", "512K"),
		{name: rowHeaptrack, skip: notInstalled("heaptrack"), run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			data := filepath.Join(r.tmp, "blocks-heaptrack")
			defer removeGlob(data + "*")
			o, err := run(ctx, blocksTimeout, "heaptrack", "-o", data, bin, count)
			return []float64{o.wall.Seconds()}, nil, err
		}},
	}
	r.alternate(ctx, []*Comparison{wall}, vs)
	for _, row := range mem.Rows {
		row.summarize()
	}
	return []*Comparison{wall, mem}, nil
}
