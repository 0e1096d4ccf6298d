package recording

import "github.com/memtrace/memtrace/internal/aggregate"

// applyTo gives the record to t as the live run gave it, for these tests'
// round trips (a run's replay takes records through pipeline.Loop, which
// recording cannot import). Records that are not Table inputs do nothing.
func applyTo(r *Record, t *aggregate.Table) {
	switch r.Kind {
	case KindEvent:
		t.Apply(&r.Event)
	case KindProcess:
		t.AddProcess(r.PID, r.Comm)
	case KindExited:
		t.MarkExited(r.PID, r.Time)
	case KindForgot:
		t.Forget(r.PID)
	case KindLost:
		t.SetLost(r.PID, r.N)
	case KindTotalLost:
		t.SetTotalLost(r.N)
	case KindSampleBytes:
		t.SetSampleBytes(r.N)
	case KindExactCounts:
		t.SetExactCounts(r.PID, r.N, r.M)
	case KindHalfLives:
		t.SetHalfLives(r.HalfLives, r.Time)
	case KindTick:
		t.Tick(r.Time)
	case KindMark:
		t.Mark(r.Mark.PID, r.Mark.Label, r.Mark.Time)
	case KindPeakTolerance:
		t.SetPeakTolerance(r.PeakTolerance)
	}
}
