package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The heapscale section (issue 33): memtrace's own memory with millions
// of live blocks and at rest, and the leak check's speed, with valgrind's
// leak check of the same heap beside it.
const (
	holdBlocks  = 5_000_000
	holdTimeout = 10 * time.Minute
	// Targets: memtrace's peak RSS for 5M live blocks, leak check
	// included; the check's time; memtrace's peak RSS for /bin/true.
	holdRSSTarget  = 400e6
	leakTimeTarget = 2.0
	trueRSSTarget  = 80e6
)

// rowValgrindLeak is valgrind's row of the leak check's comparison.
const rowValgrindLeak = "valgrind --leak-check=full"

var (
	// leakDoneLine is session's -v line at the end of a leak check.
	leakDoneLine = regexp.MustCompile(`msg="leak check done" pid=\d+ took=(\S+) cpu=(\S+)`)
	// valgrindStamp is the elapsed time --time-stamp=yes puts on each line.
	valgrindStamp = regexp.MustCompile(`==(\d+):(\d+):(\d+):(\d+)\.(\d+) \d+== `)
)

// heapscale runs testdata/bench/hold.c (5 million blocks of 48 bytes,
// held to the end) under memtrace and, when installed, valgrind; and
// /bin/true under memtrace. The Go benchmarks give the same figures
// without the kernel: bytes per live block over the whole user-space
// path (bench.BenchmarkLivePath) and the check of the same heap
// (leakcheck.BenchmarkCheckChain5M).
func (r *runner) heapscale(ctx context.Context) ([]*Comparison, error) {
	bin, err := compileC(ctx, r.root, r.tmp, "hold")
	if err != nil {
		return nil, err
	}
	n := holdBlocks
	if r.cfg.Quick {
		n = 200_000
	}
	rss := &Comparison{ID: "heapscale-rss", Title: fmt.Sprintf("memtrace's peak RSS: hold (%d live blocks of 48 bytes), and /bin/true", n), Unit: "MB",
		Notes: []string{"VmHWM from memtrace -v's last line (memtrace_peak_rss_bytes in the report line), leak check at exit included"}}
	leak := &Comparison{ID: "heapscale-leakcheck", Title: fmt.Sprintf("leak check of %d live blocks", n), Unit: "s",
		Notes: []string{"memtrace: from -v's \"leak check done\" (wall; cpu is memtrace's own CPU time in the check, less noisy on a busy machine)",
			"valgrind: from --time-stamp=yes, \"HEAP SUMMARY\" to its last line (its whole run is far longer: every access is instrumented)"}}
	holdRow, trueRow := rss.add("hold, memtrace"), rss.add("/bin/true, memtrace")
	wallRow, cpuRow := leak.add("memtrace (wall)"), leak.add("memtrace (cpu)")
	var vgRow *Row
	if why := notInstalled("valgrind"); why != "" {
		leak.skip("valgrind --leak-check=full", why)
	} else {
		vgRow = leak.add(rowValgrindLeak)
		// The yardstick: memtrace's rows as a multiple of valgrind's.
		leak.Baseline = rowValgrindLeak
	}
	if r.noBPF != "" {
		holdRow.Status, holdRow.Note = StatusSkipped, r.noBPF
		trueRow.Status, trueRow.Note = StatusSkipped, r.noBPF
		wallRow.Status, wallRow.Note = StatusSkipped, r.noBPF
		cpuRow.Status, cpuRow.Note = StatusSkipped, r.noBPF
	}
	count := strconv.Itoa(n)
	for round := range r.cfg.Rounds {
		r.logf("heapscale: round %d/%d", round+1, r.cfg.Rounds)
		if r.noBPF == "" {
			o, err := run(ctx, holdTimeout, r.memtrace, "-v", "--json", "-o", os.DevNull, "--", bin, count)
			peak, perr := peakRSS(o, err)
			holdRow.record(peak/1e6, perr)
			wall, cpu, lerr := leakCheckTimes(o, err)
			wallRow.record(wall, lerr)
			cpuRow.record(cpu, lerr)
			o, err = run(ctx, holdTimeout, r.memtrace, "-v", "--json", "-o", os.DevNull, "--", "/bin/true")
			peak, perr = peakRSS(o, err)
			trueRow.record(peak/1e6, perr)
		}
		// valgrind is slow (minutes for 5M blocks): once is enough.
		if vgRow != nil && round == 0 {
			o, err := run(ctx, holdTimeout, "valgrind", "--leak-check=full", "--time-stamp=yes", bin, count)
			vgRow.record(valgrindLeakTime(o, err))
		}
	}
	for _, c := range []*Comparison{rss, leak} {
		for _, row := range c.Rows {
			if row.Status != StatusSkipped {
				row.summarize()
			}
		}
	}
	target := func(row *Row, v float64, unit string, scale float64) {
		if row.Status == StatusOK {
			row.Target = fmt.Sprintf("<= %g %s", v/scale, unit)
			row.Met = ptr(row.Median <= v/scale)
		}
	}
	leak.relate("")
	target(holdRow, holdRSSTarget, "MB", 1e6)
	target(trueRow, trueRSSTarget, "MB", 1e6)
	target(wallRow, leakTimeTarget, "s", 1)

	// The same figures without the kernel, from the Go benchmarks.
	gob := &Comparison{ID: "heapscale-go", Title: "memtrace's memory per live block and leak-check cost, Go benchmarks", Unit: "",
		Notes: []string{"BenchmarkLivePath: record decoded, loop, table (5M blocks; 1M with --quick); BenchmarkCheckChain5M: the check of hold.c's heap through process_vm_readv"}}
	if err := r.heapscaleGo(ctx, gob); err != nil {
		return nil, err
	}
	return []*Comparison{rss, leak, gob}, nil
}

// heapscaleGo fills c from the Go benchmarks, run once (they count bytes,
// or take seconds each).
func (r *runner) heapscaleGo(ctx context.Context, c *Comparison) error {
	type metricRow struct{ pkg, bench, unit, name string }
	rows := []metricRow{
		{"bench", "BenchmarkLivePath/5M", "B/live-block", "live path: Go heap per live block (B)"},
		{"bench", "BenchmarkLivePath/5M", "garbage-B/event", "live path: garbage per event (B, the table's growth)"},
		{"bench", "BenchmarkLivePath/5M", "allocs/event", "live path: allocations per event"},
		{"leakcheck", "BenchmarkCheckChain5M", "ns/block", "leak check: ns per block"},
		{"leakcheck", "BenchmarkCheckChain5M", "B/block", "leak check: bytes allocated per block"},
	}
	patterns := map[string]string{"bench": "^BenchmarkLivePath$/^5M$", "leakcheck": "^BenchmarkCheckChain5M$"}
	results := map[string]map[string]map[string]float64{}
	errs := map[string]error{}
	for pkg, pattern := range patterns {
		if r.cfg.Quick && pkg == "bench" {
			pattern = "^BenchmarkLivePath$/^1M$"
		}
		bin, err := r.testBinary(ctx, pkg)
		if err != nil {
			return err
		}
		r.logf("heapscale: go benchmark %s", pattern)
		results[pkg], errs[pkg] = goBench(ctx, bin, pattern, "1x")
	}
	for _, mr := range rows {
		row := c.add(mr.name)
		name := mr.bench
		if r.cfg.Quick && mr.pkg == "bench" {
			name = "BenchmarkLivePath/1M"
		}
		if errs[mr.pkg] != nil {
			row.record(0, errs[mr.pkg])
		} else {
			row.record(metric(results[mr.pkg], name, mr.unit))
		}
		row.summarize()
	}
	return nil
}

// peakRSS reads memtrace -v's peak RSS line, in bytes.
func peakRSS(o output, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	m := peakRSSLine.FindStringSubmatch(o.stderr)
	if m == nil {
		return 0, fmt.Errorf("memtrace -v logged no peak RSS")
	}
	return strconv.ParseFloat(m[1], 64)
}

// leakCheckTimes reads memtrace -v's leak check times, in seconds.
func leakCheckTimes(o output, err error) (wall, cpu float64, _ error) {
	if err != nil {
		return 0, 0, err
	}
	m := leakDoneLine.FindStringSubmatch(o.stderr)
	if m == nil {
		return 0, 0, fmt.Errorf("memtrace -v logged no leak check")
	}
	w, err := time.ParseDuration(m[1])
	if err != nil {
		return 0, 0, err
	}
	c, err := time.ParseDuration(m[2])
	return w.Seconds(), c.Seconds(), err
}

// valgrindLeakTime is the time valgrind's leak check took: from its
// "HEAP SUMMARY" line (the check starts right after it) to its last line.
func valgrindLeakTime(o output, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	var start, end float64
	found := false
	for line := range strings.Lines(o.stderr) {
		m := valgrindStamp.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var f [5]float64
		for i := range f {
			f[i], _ = strconv.ParseFloat(m[i+1], 64)
		}
		t := f[0]*86400 + f[1]*3600 + f[2]*60 + f[3] + f[4]/1000
		if !found && strings.Contains(line, "HEAP SUMMARY:") {
			start, found = t, true
		}
		end = t
	}
	if !found {
		return 0, fmt.Errorf("valgrind printed no HEAP SUMMARY")
	}
	return end - start, nil
}
