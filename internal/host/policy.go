package host

import "time"

// The whole-host mode's policy data: when a batch of exits is written
// early,
// which processes are known, and how often what exits missed is swept.

const (
	// maxHeldExits bounds the exits held until the next report (and the
	// memory they hold): at this many, they are written at once.
	maxHeldExits = 1024
	// ExitsAlone: without periodic reports (no -i), the exits held are
	// written this long after the first of them, so that a long run (a
	// service writing NDJSON) gets them within a minute, not at its end.
	ExitsAlone = time.Minute
	// SweepEvery: how often the per-process BPF maps and the table are
	// checked for processes gone without an exit event (one lost in a
	// full ring).
	SweepEvery = time.Minute
)

// ExitBatch paces the batches of exits whose final records are held: a
// batch is written just before each report (the session does that), so
// that the processes that exited are summarised once per report; earlier
// only when maxHeldExits are held, or, in a run without periodic
// reports, ExitsAlone after the first exit of the batch.
type ExitBatch struct {
	since time.Time // when the batch's first process exited
}

// Exited notes an exit; held is how many exits the batch held before it.
func (b *ExitBatch) Exited(held int) {
	if held == 0 {
		b.since = time.Now()
	}
}

// Due reports whether the held exits are to be written now, before the
// next report; periodic says the run reports periodically (-i).
func (b *ExitBatch) Due(held int, periodic bool) bool {
	return held >= maxHeldExits || (!periodic && held > 0 && time.Since(b.since) >= ExitsAlone)
}

// Seen tracks which processes' events were met: the previous event's
// process is known, and the names of programs executed by processes not
// seen yet are kept (a short-lived one may be gone before its first event
// is read, and /proc with it).
type Seen struct {
	last  uint32
	comms map[uint32]string
}

// Same reports whether pid is the previous event's process, and makes it
// the previous one.
func (s *Seen) Same(pid uint32) bool {
	if pid == s.last {
		return true
	}
	s.last = pid
	return false
}

// Executed keeps the name of the program pid executed, for its first event.
func (s *Seen) Executed(pid uint32, comm string) {
	if s.comms == nil {
		s.comms = map[uint32]string{}
	}
	s.comms[pid] = comm
}

// Comm is pid's name at its first event: the program it executed, or
// /proc's.
func (s *Seen) Comm(pid uint32) string {
	if c, ok := s.comms[pid]; ok {
		delete(s.comms, pid)
		return c
	}
	return Comm(int(pid))
}

// Forget: pid executed or exited; its next event is met as a new one.
func (s *Seen) Forget(pid uint32, exited bool) {
	if s.last == pid {
		s.last = 0
	}
	if exited {
		delete(s.comms, pid)
	}
}

// Sweep drops the names kept for processes gone.
func (s *Seen) Sweep() {
	for pid := range s.comms {
		if !Alive(int(pid)) {
			delete(s.comms, pid)
		}
	}
}
