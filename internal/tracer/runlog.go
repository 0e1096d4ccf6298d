package tracer

import (
	"context"
	"log/slog"
	"time"
)

// LogRun logs (-v, at the end of a run) how many events reached user
// space since start and what each BPF program cost.
func LogRun(log *slog.Logger, d *Drainer, objs *Objects, start time.Time) {
	took := time.Since(start)
	log.Info("events read", "events", d.Events, "seconds", took.Seconds(),
		"per_second", float64(d.Events)/took.Seconds())
	// Sampled mode: the blocks the probes still watch for a free, and the
	// filter's counts in front of them (equal, when forgotten blocks left
	// no count behind).
	if objs.sampleBytes > 0 && log.Enabled(context.Background(), slog.LevelInfo) {
		if filter, err := objs.SampledFilterCount(); err == nil {
			log.Info("sampled blocks", "blocks", objs.SampledBlocks(), "filter_count", filter)
		}
	}
	// What each BPF program cost, when kernel.bpf_stats_enabled is on (make bench).
	stats, err := objs.ProgramStats()
	if err != nil {
		log.Warn("bpf program stats", "err", err)
	}
	for _, p := range stats {
		if p.Runs > 0 {
			log.Info("bpf program", "name", p.Name, "runs", p.Runs, "run_ns", p.Runtime.Nanoseconds(),
				"ns_per_run", float64(p.Runtime.Nanoseconds())/float64(p.Runs))
		}
	}
}
