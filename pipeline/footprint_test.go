package pipeline

import (
	"slices"
	"testing"

	"github.com/memtrace/memtrace/footprint"
)

// TestAligned: a reading's range states follow their regions into a later
// snapshot; a region made or cut since has none.
func TestAligned(t *testing.T) {
	a, b, c := footprint.Range{Start: 0x1000, End: 0x3000}, footprint.Range{Start: 0x5000, End: 0x6000}, footprint.Range{Start: 0x8000, End: 0x9000}
	sa, sb := footprint.State{Reserved: 0x2000, Committed: 0x1000, Resident: 0x1000}, footprint.State{Reserved: 0x1000}
	r := footprint.Reading{RSS: 7, Ranges: []footprint.State{sa, sb}}
	tests := []struct {
		name    string
		regions []footprint.Range
		want    []footprint.State
	}{
		{"unchanged", []footprint.Range{a, b}, []footprint.State{sa, sb}},
		{"a region made since", []footprint.Range{a, b, c}, []footprint.State{sa, sb, {}}},
		{"a region gone", []footprint.Range{b}, []footprint.State{sb}},
		{"a region cut", []footprint.Range{{Start: 0x1000, End: 0x2000}, b}, []footprint.State{{}, sb}},
	}
	for _, tc := range tests {
		got := Aligned(r, []footprint.Range{a, b}, tc.regions)
		if !slices.Equal(got.Ranges, tc.want) || got.RSS != 7 {
			t.Errorf("%s: %+v, want %+v", tc.name, got.Ranges, tc.want)
		}
	}
}
