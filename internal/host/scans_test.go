package host

import (
	"slices"
	"testing"
	"time"
)

// TestScans: a scan due now runs at once; one that asks to retry runs
// again after the next delay, until the delays run out; a scan with no
// retry ends with done; Drop forgets one.
func TestScans(t *testing.T) {
	var s Scans
	if w := s.Wait(time.Second); w != time.Second {
		t.Errorf("no scan: wait %v", w)
	}
	s.Add(7)
	s.Add(7) // queued already
	s.Add(8)
	var scanned, done []int
	s.Run(func(pid int) bool { scanned = append(scanned, pid); return pid == 7 }, func(pid int) { done = append(done, pid) })
	slices.Sort(scanned)
	if !slices.Equal(scanned, []int{7, 8}) || !slices.Equal(done, []int{8}) {
		t.Fatalf("scanned %v, done %v; want [7 8], [8]", scanned, done)
	}
	if w := s.Wait(time.Second); w <= 0 || w > scanDelays[1] {
		t.Errorf("7 retries after %v, want (0, %v]", w, scanDelays[1])
	}
	tries := 1
	for n := 0; s.Wait(time.Hour) < time.Hour && n < 2*len(scanDelays); n++ {
		time.Sleep(s.Wait(time.Hour))
		s.Run(func(int) bool { tries++; return true }, func(int) { t.Error("done after a retry") })
	}
	if tries != len(scanDelays) || s.Wait(time.Second) != time.Second {
		t.Errorf("%d scans of a process that always retries, want %d, then none", tries, len(scanDelays))
	}
	s.Add(9)
	s.Drop(9)
	if w := s.Wait(time.Second); w != time.Second {
		t.Errorf("dropped scan still due in %v", w)
	}
}
