package aggregate

import (
	"time"

	"github.com/memtrace/memtrace/internal/event"
)

// Observer sees every input a Table is given, in order. A Table is a pure
// function of these inputs, so an Observer that writes them down (a
// recording) lets a new Table be rebuilt exactly by calling the same
// methods again (replay).
type Observer interface {
	Event(e *event.Event)
	Process(pid uint32, comm string)
	Exited(pid uint32, when uint64)
	Forgot(pid uint32)
	Lost(pid uint32, n uint64)
	TotalLost(n uint64)
	SampleBytes(n uint64)
	ExactCounts(pid uint32, allocs, allocBytes uint64)
	HalfLives(halfLives []time.Duration, now uint64)
	Tick(now uint64)
	Mark(m Mark)
	PeakTolerance(t PeakTolerance)
}

// SetObserver makes the Table tell o about every input from now on (nil:
// none). Set it before the first input so that o sees them all.
func (t *Table) SetObserver(o Observer) { t.obs = o }
