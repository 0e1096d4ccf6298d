package session

import (
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

// TestRaceWatch: of the pages a live check read as gone, those the events
// drained after its read put anew (a move's new range, a new sample) stay
// charged, and a process that exited or executed meanwhile is not
// uncharged at all.
func TestRaceWatch(t *testing.T) {
	const pid, page = 7, 4096
	gone := []uint64{0x10000, 0x11000, 0x20000, 0x30000}
	shrunk := []aggregate.SampledSpan{
		{Addr: 0x40000, Start: 0x40000, End: 0x240000},
		{Addr: 0x50000, Start: 0x50000, End: 0x250000},
	}
	tests := []struct {
		name      string
		events    []*event.Event
		gone      []uint64
		shrunkAt  []uint64
		wantEnded bool
	}{
		{name: "nothing meanwhile", gone: gone, shrunkAt: []uint64{0x40000, 0x50000}},
		{
			name: "another process's events",
			events: []*event.Event{
				{PID: pid + 1, Kind: event.Moved, Addr: 0x10000, Size: 0x400000, OldAddr: 0x90000000, OldSize: 0x400000},
				{PID: pid + 1, Kind: event.Exit},
			},
			gone: gone, shrunkAt: []uint64{0x40000, 0x50000},
		},
		{
			// An mremap after the read moved pages into 0x10000..0x12000 (and
			// a span's start): they are the moved ones, not those read gone.
			name:   "moved in",
			events: []*event.Event{{PID: pid, Kind: event.Moved, Addr: 0x10000, OldAddr: 0x90000000, OldSize: 0x31000}},
			gone:   nil, shrunkAt: []uint64{0x50000},
		},
		{
			name:   "program's mremap",
			events: []*event.Event{{PID: pid, Kind: event.Mremap, Addr: 0x20000, Size: 0x1000, OldAddr: 0x90000000, OldSize: 0x1000}},
			gone:   []uint64{0x10000, 0x11000, 0x30000}, shrunkAt: []uint64{0x40000, 0x50000},
		},
		{
			name:   "a new sample",
			events: []*event.Event{{PID: pid, Kind: event.Fault, Addr: 0x30000, Size: page}},
			gone:   []uint64{0x10000, 0x11000, 0x20000}, shrunkAt: []uint64{0x40000, 0x50000},
		},
		{
			name:   "allocations change no page",
			events: []*event.Event{{PID: pid, Kind: event.Alloc, Addr: 0x10000, Size: 64}, {PID: pid, Kind: event.Munmap, Addr: 0x20000, Size: page}},
			gone:   gone, shrunkAt: []uint64{0x40000, 0x50000},
		},
		{name: "exited", events: []*event.Event{{PID: pid, Kind: event.Exit}}, wantEnded: true},
		{name: "executed", events: []*event.Event{{PID: pid, Kind: event.Exec}}, wantEnded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &raceWatch{pid: pid}
			for _, e := range tt.events {
				w.saw(e)
			}
			if w.ended != tt.wantEnded {
				t.Fatalf("ended %v, want %v", w.ended, tt.wantEnded)
			}
			if tt.wantEnded {
				return
			}
			g, s := w.keep(slices.Clone(gone), slices.Clone(shrunk))
			var at []uint64
			for _, sp := range s {
				at = append(at, sp.Addr)
			}
			if !slices.Equal(g, tt.gone) || !slices.Equal(at, tt.shrunkAt) {
				t.Errorf("uncharged %#x and spans at %#x, want %#x and %#x", g, at, tt.gone, tt.shrunkAt)
			}
		})
	}
}
