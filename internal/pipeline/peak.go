package pipeline

import (
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/recording"
)

// PeakOf is the moment `replay --at peak` shows, as of the end of a run:
// the kept peak snapshot of the process with the largest heap peak (the
// first in the snapshot's order among equals). ok is false when no
// process made a peak snapshot (no allocation).
func PeakOf(t *aggregate.Table) (p recording.Peak, ok bool) {
	var best uint64
	for _, proc := range t.Snapshot().Processes {
		if proc.Peak != nil && (!ok || proc.PeakLiveBytes > best) {
			p, best, ok = recording.Peak{PID: proc.PID, Snapshots: proc.Peak.Snapshots, Time: proc.Peak.Time}, proc.PeakLiveBytes, true
		}
	}
	return p, ok
}
