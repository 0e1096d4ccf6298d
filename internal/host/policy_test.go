package host

import "testing"

// TestSeen: a process is new at its first event and after an exec; the
// name of the program it executed is its name once, then /proc's.
func TestSeen(t *testing.T) {
	var s Seen
	if s.Same(42) || !s.Same(42) {
		t.Fatal("pid 42: first event not new, or second new")
	}
	s.Forget(42, false) // exec
	s.Executed(42, "newprog")
	if s.Same(42) {
		t.Error("pid 42 after its exec: not new")
	}
	if c := s.Comm(42); c != "newprog" {
		t.Errorf("comm %q, want newprog", c)
	}
	s.Executed(43, "gone")
	s.Forget(43, true) // exit
	if _, ok := s.comms[43]; ok {
		t.Error("an exited process's name is kept")
	}
}

// TestExitBatch: held exits wait for the next report, and are written
// early at maxHeldExits, or, without periodic reports, ExitsAlone after
// the first of them.
func TestExitBatch(t *testing.T) {
	var b ExitBatch
	b.Exited(0)
	for _, c := range []struct {
		held     int
		periodic bool
		due      bool
	}{
		{0, false, false}, {1, false, false}, {1, true, false}, {maxHeldExits - 1, true, false},
		{maxHeldExits, true, true}, {maxHeldExits, false, true},
	} {
		if got := b.Due(c.held, c.periodic); got != c.due {
			t.Errorf("just after the first exit: Due(%d, periodic %v) = %v, want %v", c.held, c.periodic, got, c.due)
		}
	}
	b.since = b.since.Add(-ExitsAlone)
	for _, c := range []struct {
		held     int
		periodic bool
		due      bool
	}{{0, false, false}, {1, false, true}, {1, true, false}} {
		if got := b.Due(c.held, c.periodic); got != c.due {
			t.Errorf("ExitsAlone after: Due(%d, periodic %v) = %v, want %v", c.held, c.periodic, got, c.due)
		}
	}
}
