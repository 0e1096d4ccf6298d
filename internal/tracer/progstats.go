package tracer

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"
)

// ProgramStats is what the kernel measured of one tracing program: how
// often it ran and for how long in all. Both stay 0 unless
// kernel.bpf_stats_enabled is set (sysctl, or a BPF_ENABLE_STATS holder
// such as membench) while it runs.
type ProgramStats struct {
	Name    string
	Runs    uint64
	Runtime time.Duration
}

// ProgramStats returns the run counts and run times of the tracing
// programs loaded (make bench's per-program figures).
func (t *Objects) ProgramStats() ([]ProgramStats, error) {
	var out []ProgramStats
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"mt_alloc_entry", t.objs.Entry}, {"mt_alloc_ret", t.objs.Ret}, {"mt_alloc_sess", t.session},
		{"mt_exec", t.objs.OnExec}, {"mt_exit", t.objs.OnExit},
		// The page-fault path (bpf/resident.h): what every fault pays.
		{"mt_fault_user", t.objs.OnFaultUser}, {"mt_fault_kern", t.objs.OnFaultKernel},
		{"mt_page_alloc", t.objs.OnPageAlloc}, {"mt_rss_stat", t.objs.OnRssStat}} {
		if p.prog == nil {
			continue
		}
		st, err := p.prog.Stats()
		if err != nil {
			return nil, fmt.Errorf("stats of program %s: %w", p.name, err)
		}
		out = append(out, ProgramStats{Name: p.name, Runs: st.RunCount, Runtime: st.Runtime})
	}
	return out, nil
}
