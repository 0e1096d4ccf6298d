package history

import (
	"testing"

	"github.com/memtrace/memtrace/footprint"
)

// TestHeapResident: a sample takes the heap resident bytes of the latest
// footprint reading, carried over samples taken without one; a Go
// program's Go heap counts.
func TestHeapResident(t *testing.T) {
	c := New(Options{})
	want := []uint64{0, 500, 500, 700, 900}
	for i, r := range []uint64{0, 500, 0, 700, 800} {
		s := snap(100, 100)
		switch {
		case i == 4: // a cgo program: glibc's heap and the Go heap
			s.Processes[0].SetFootprint(footprint.Reading{HeapResident: 100, GoHeap: footprint.State{Resident: r}})
		case r > 0:
			s.Processes[0].SetFootprint(footprint.Reading{HeapResident: r})
		}
		c.Sample(uint64(i+1)*10, s, nil)
	}
	for i, s := range c.History().Processes[0].Samples {
		if s.HeapResident != want[i] {
			t.Errorf("sample %d: heap resident %d, want %d", i, s.HeapResident, want[i])
		}
	}
}
