package aggregate

import (
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

// TestTopSiteAddresses: sites by live bytes, most first, each address
// once (two stacks of one site are one address), n at most.
func TestTopSiteAddresses(t *testing.T) {
	const site3 = 0x40_3000
	tb := NewTable()
	stacked := alloc(blockC+0x100, 300, site1)
	stacked.StackID = 7 // another stack at site1: another site, the same address
	for _, e := range []event.Event{
		alloc(blockA, 100, site1), alloc(blockB, 500, site2), alloc(blockC, 50, site3), stacked,
		alloc(blockC+0x1000, 1000, site3), free(blockC + 0x1000), // site3 freed its biggest
	} {
		tb.Apply(&e)
	}
	tests := []struct {
		n    int
		want []uint64
	}{
		{0, nil},
		{1, []uint64{site2}},
		{2, []uint64{site2, site1}},
		{5, []uint64{site2, site1, site3}},
	}
	for _, tt := range tests {
		if got := tb.TopSiteAddresses(testPID, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("n %d: %#x, want %#x", tt.n, got, tt.want)
		}
	}
	if got := tb.TopSiteAddresses(testPID+1, 3); got != nil {
		t.Errorf("an unknown process: %#x, want none", got)
	}
}
