package pipeline

import (
	"slices"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/footprint"
)

// WithFootprints attaches recorded readings (pid -> latest, as a replay has them) to
// a replayed snapshot.
func WithFootprints(snap *aggregate.Snapshot, recorded map[uint32]RecordedFootprint) {
	for i := range snap.Processes {
		p := &snap.Processes[i]
		if rf, ok := recorded[p.PID]; ok {
			p.SetFootprint(Aligned(rf.R, rf.Ranges, p.Regions))
		}
	}
}

// Aligned is r, read with ranges, for the regions of a later snapshot:
// each region gets the state of the range it equals (a region made or
// cut since the reading has none).
func Aligned(r footprint.Reading, ranges, regions []footprint.Range) footprint.Reading {
	if slices.Equal(ranges, regions) {
		return r
	}
	byRange := make(map[footprint.Range]footprint.State, len(ranges))
	for j, g := range ranges {
		if j < len(r.Ranges) {
			byRange[g] = r.Ranges[j]
		}
	}
	states := make([]footprint.State, len(regions))
	for j, g := range regions {
		states[j] = byRange[g]
	}
	r.Ranges = states
	return r
}

// RecordedFootprint is a footprint record: the reading and its ranges.
type RecordedFootprint struct {
	R      footprint.Reading
	Ranges []footprint.Range
}
