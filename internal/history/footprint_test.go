package history

import (
	"testing"

	"github.com/memtrace/memtrace/internal/footprint"
)

// TestHeapResident: a sample takes the heap resident bytes of the latest
// footprint reading, carried over samples taken without one; a Go
// program's Go heap counts. Samples before the first reading say they have
// none (the page draws no line there, rather than 0 B).
func TestHeapResident(t *testing.T) {
	c := New(Options{})
	want := []uint64{0, 500, 500, 700, 900}
	read := []bool{false, true, true, true, true}
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
		if s.HeapResident != want[i] || s.HeapRead != read[i] {
			t.Errorf("sample %d: heap resident %d (read %v), want %d (%v)", i, s.HeapResident, s.HeapRead, want[i], read[i])
		}
	}
}
