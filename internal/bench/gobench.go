package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// testBinary compiles a package's tests once per run, so that rounds can
// alternate between packages without rebuilding.
func (r *runner) testBinary(ctx context.Context, pkg string) (string, error) {
	out := filepath.Join(r.tmp, strings.ReplaceAll(pkg, "/", "_")+".test")
	if r.testBins[pkg] {
		return out, nil
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, "./internal/"+pkg)
	cmd.Dir = r.root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go test -c ./internal/%s: %w\n%s", pkg, err, b)
	}
	if r.testBins == nil {
		r.testBins = map[string]bool{}
	}
	r.testBins[pkg] = true
	return out, nil
}

// goBench runs the benchmarks of a test binary that match pattern on one
// core and returns each one's metrics by unit ("events/s", "B/live-block").
func goBench(ctx context.Context, bin, pattern, benchtime string) (map[string]map[string]float64, error) {
	args := []string{"-test.run", "^$", "-test.bench", pattern, "-test.cpu", "1", "-test.count", "1"}
	if benchtime != "" {
		args = append(args, "-test.benchtime", benchtime)
	}
	o, err := run(ctx, 15*time.Minute, bin, args...)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, tail(o.stdout))
	}
	m := parseBenchOutput(o.stdout)
	if len(m) == 0 {
		return nil, fmt.Errorf("%s -test.bench %q ran no benchmark%s", filepath.Base(bin), pattern, tail(o.stdout))
	}
	return m, nil
}

// procSuffix is the "-N" GOMAXPROCS suffix of a benchmark name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBenchOutput reads `BenchmarkX  N  V unit  V unit …` lines.
func parseBenchOutput(out string) map[string]map[string]float64 {
	m := map[string]map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		metrics := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		m[name] = metrics
	}
	return m
}

// metric picks one benchmark's metric, or says why it is missing (a
// skipped benchmark prints its reason, not a result line).
func metric(m map[string]map[string]float64, name, unit string) (float64, error) {
	v, ok := m[name][unit]
	if !ok {
		return 0, fmt.Errorf("%s reported no %s", name, unit)
	}
	return v, nil
}

// subBenchmarks is the -test.bench pattern of benchmark name's sub-benchmarks
// subs.
func subBenchmarks(name string, subs []string) string {
	return "^" + name + "$/^(" + strings.Join(subs, "|") + ")$"
}
