package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Results is everything one run measured; it is written as JSON and printed
// as tables from the same values.
type Results struct {
	Started     time.Time     `json:"started"`
	Seconds     float64       `json:"seconds"`
	Host        Host          `json:"host"`
	Config      Config        `json:"config"`
	Comparisons []*Comparison `json:"comparisons"`
}

// Host describes the machine; the load averages say how noisy it was.
type Host struct {
	Kernel    string `json:"kernel"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go"`
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

// Comparison is one table: variants measured side by side, round by round.
type Comparison struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Unit of Rounds and Median ("ns/pair", "s", "ms", "events/s", …).
	Unit string `json:"unit"`
	// Baseline names the row that Ratio and Overhead are relative to.
	Baseline string `json:"baseline,omitempty"`
	// HigherIsBetter: a rate (requests/s), where Overhead means nothing.
	HigherIsBetter bool     `json:"higher_is_better,omitempty"`
	Rows           []*Row   `json:"rows"`
	Notes          []string `json:"notes,omitempty"`
}

// Row status values.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped"
	StatusFailed  = "failed"
)

// Row is one variant's figures.
type Row struct {
	Name   string    `json:"name"`
	Status string    `json:"status"`
	Note   string    `json:"note,omitempty"`
	Rounds []float64 `json:"rounds,omitempty"`
	Median float64   `json:"median,omitempty"`
	Min    float64   `json:"min,omitempty"`
	Max    float64   `json:"max,omitempty"`
	// Ratio is Median over the baseline's median.
	Ratio *float64 `json:"ratio,omitempty"`
	// Overhead is Median minus the baseline's median (micro: ns per pair).
	Overhead *float64 `json:"overhead,omitempty"`
	// XFloor is the overhead as a multiple of the floor row's: the median
	// over rounds of (this − baseline) / (floor − baseline), each from
	// runs of the same round, so slow drifts in the machine's load cancel.
	// XFloorRounds are those per-round ratios.
	XFloor       *float64  `json:"x_floor,omitempty"`
	XFloorRounds []float64 `json:"x_floor_rounds,omitempty"`
	// Tainted are rounds left out of the median: another tracer's uprobes
	// were in malloc or free (host-wide tracing) before or after them.
	Tainted []float64 `json:"tainted_rounds,omitempty"`
	// Contaminated: every round was tainted, so the figures include
	// another tracer's probes.
	Contaminated bool `json:"contaminated,omitempty"`
	// Lost is memtrace's lost_events per round.
	Lost []uint64 `json:"lost_events,omitempty"`
	// ConsumerNsPerEvent is memtrace's own CPU time per event (its
	// process time minus the traced program's, less the same for a
	// 1000-pair run: start-up and report cancel out), median over rounds.
	ConsumerNsPerEvent *float64 `json:"consumer_cpu_ns_per_event,omitempty"`
	// BPF is the kernel's account of each BPF program per pair (runs per
	// pair, ns per run, ns per pair; medians over rounds), read with
	// kernel.bpf_stats_enabled on: memtrace's programs from its -v lines,
	// the floors' empty program from its own counters.
	BPF map[string]ProgCost `json:"bpf_programs,omitempty"`
	// Target and Met: the goal this row is held to, and whether it was met.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// errs collects failed rounds; the row fails if no round succeeded.
	errs []string
	// taintedAt is where foreign probes were seen.
	taintedAt []string
	// bpf collects BPF's rounds.
	bpf bpfRounds
	// byRound holds the clean rounds' values by round number, for pairing.
	byRound map[int]float64
}

// row finds a row by name.
func (c *Comparison) row(name string) *Row {
	for _, r := range c.Rows {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// add appends a row that will be measured.
func (c *Comparison) add(name string) *Row {
	r := &Row{Name: name, Status: StatusOK}
	c.Rows = append(c.Rows, r)
	return r
}

// skip appends a row that cannot be measured here, saying why.
func (c *Comparison) skip(name, why string) *Row {
	r := &Row{Name: name, Status: StatusSkipped, Note: why}
	c.Rows = append(c.Rows, r)
	return r
}

// WriteJSON writes the results to path, creating its directory.
func (r *Results) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}
