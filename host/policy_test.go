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

// TestExitBatch: a batch is due a second after its first exit, or at
// maxHeldExits exits, never when empty.
func TestExitBatch(t *testing.T) {
	var b ExitBatch
	b.Exited(0)
	if b.Due(0) || b.Due(1) || !b.Due(maxHeldExits) {
		t.Errorf("due: empty %v, one just now %v, %d %v", b.Due(0), b.Due(1), maxHeldExits, b.Due(maxHeldExits))
	}
	b.since = b.since.Add(-exitFlush)
	if !b.Due(1) {
		t.Error("one exit held for exitFlush: not due")
	}
}
