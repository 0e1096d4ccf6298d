package bench

import (
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// enableBPFStats turns kernel.bpf_stats_enabled on while the returned
// closer is open (BPF_ENABLE_STATS: it goes back off when the bench ends,
// even if it is killed). The kernel then times every program run.
func enableBPFStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable BPF run-time statistics: %w", err)
	}
	return c, nil
}

// statsOn reports whether the kernel times BPF programs now, whoever
// turned it on.
func statsOn() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// progRun is what the kernel counted of one BPF program in one run.
type progRun struct {
	runs, ns uint64
}

// bpfProgramLine is memtrace -v's last word on each program (session's logEvents).
var bpfProgramLine = regexp.MustCompile(`msg="bpf program" name=(\S+) runs=(\d+) run_ns=(\d+)`)

// parseBPFPrograms reads memtrace -v's "bpf program" lines.
func parseBPFPrograms(stderr string) map[string]progRun {
	out := map[string]progRun{}
	for _, m := range bpfProgramLine.FindAllStringSubmatch(stderr, -1) {
		runs, _ := strconv.ParseUint(m[2], 10, 64)
		ns, _ := strconv.ParseUint(m[3], 10, 64)
		out[m[1]] = progRun{runs: runs, ns: ns}
	}
	return out
}

// programStats reads one program's counters (for the floors' empty program).
func programStats(p *ebpf.Program) (progRun, error) {
	st, err := p.Stats()
	if err != nil {
		return progRun{}, fmt.Errorf("BPF program stats: %w", err)
	}
	return progRun{runs: st.RunCount, ns: uint64(st.Runtime.Nanoseconds())}, nil
}

// ProgCost is one BPF program's share of a pair, medians over rounds.
type ProgCost struct {
	RunsPerPair float64 `json:"runs_per_pair"`
	NsPerRun    float64 `json:"ns_per_run"`
	NsPerPair   float64 `json:"ns_per_pair"`
}

// bpfRounds collects a row's per-program figures, round by round.
type bpfRounds map[string][]ProgCost

// add records one run of pairs malloc/free pairs.
func (b bpfRounds) add(progs map[string]progRun, pairs int64) {
	if pairs <= 0 {
		return
	}
	for name, p := range progs {
		if p.runs == 0 {
			continue
		}
		b[name] = append(b[name], ProgCost{
			RunsPerPair: float64(p.runs) / float64(pairs),
			NsPerRun:    float64(p.ns) / float64(p.runs),
			NsPerPair:   float64(p.ns) / float64(pairs),
		})
	}
}

// summarize is the median of each figure, per program.
func (b bpfRounds) summarize() map[string]ProgCost {
	if len(b) == 0 {
		return nil
	}
	out := map[string]ProgCost{}
	for name, xs := range b {
		pick := func(f func(ProgCost) float64) float64 {
			v := make([]float64, len(xs))
			for i, x := range xs {
				v[i] = f(x)
			}
			return median(v)
		}
		out[name] = ProgCost{
			RunsPerPair: pick(func(c ProgCost) float64 { return c.RunsPerPair }),
			NsPerRun:    pick(func(c ProgCost) float64 { return c.NsPerRun }),
			NsPerPair:   pick(func(c ProgCost) float64 { return c.NsPerPair }),
		}
	}
	return out
}

// bpfCell prints a row's per-program figures: the total BPF time per pair,
// then each program's runs per pair × ns per run.
func bpfCell(progs map[string]ProgCost) string {
	if len(progs) == 0 {
		return ""
	}
	var total float64
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(progs)) {
		p := progs[name]
		total += p.NsPerPair
		parts = append(parts, fmt.Sprintf("%s %.2f×%.0f", name, p.RunsPerPair, p.NsPerRun))
	}
	return fmt.Sprintf("%.0f (%s)", total, strings.Join(parts, ", "))
}
