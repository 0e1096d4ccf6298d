package bench

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

// The consumer benchmarks measure what memtrace's reader does per event on
// one core (run them with -cpu 1): decode a struct event record and apply
// it to the aggregate table. The stream is malloc/free churn with 16384
// blocks live and 4000 call sites, replayed in steady state.
const (
	churnSteps = 1 << 15 // 2^16 events per cycle
	churnLive  = 1 << 14
	churnSites = 4000
)

// BenchmarkDecodeApply decodes records from memory and aggregates them:
// the consumer without the ring.
func BenchmarkDecodeApply(b *testing.B) {
	cycle := churnStream(churnSteps, churnLive, churnSites)
	slab := make([]byte, len(cycle)*recordSize)
	for i, e := range cycle {
		encodeRecord(slab[i*recordSize:], e)
	}
	tb := aggregate.NewTable()
	var ev event.Event
	pass := func() {
		for off := 0; off < len(slab); off += recordSize {
			if decodeRecord(slab[off:off+recordSize], &ev) {
				tb.Apply(&ev)
			}
		}
	}
	pass() // warm up: live set built, sites seen
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		pass()
	}
	reportEvents(b, b.N*len(cycle))
}

// BenchmarkRingDecodeApply reads the records out of a real BPF ring buffer
// with cilium's reader, as tracer.Drainer does, then decodes and
// aggregates them. Filling the ring (in the kernel) is not timed. Needs root.
func BenchmarkRingDecodeApply(b *testing.B) {
	if why := bpfUnavailable(); why != "" {
		b.Skip(why)
	}
	cycle := churnStream(churnSteps, churnLive, churnSites)
	f, err := newRingFiller(8<<20, cycle)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rd, err := ringbuf.NewReader(f.Ring)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	tb := aggregate.NewTable()
	var rec ringbuf.Record
	var ev event.Event
	batch := len(cycle)
	drain := func() int {
		n := 0
		// Records are all there: read until the ring is empty, as
		// Drainer.Poll(0, …) does. The deadline makes the reader look
		// without waiting for a wakeup the filler never sends.
		rd.SetDeadline(time.Now())
		for rd.AvailableBytes() > 0 {
			if err := rd.ReadInto(&rec); errors.Is(err, os.ErrDeadlineExceeded) {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			if decodeRecord(rec.RawSample, &ev) {
				tb.Apply(&ev)
			}
			n++
		}
		return n
	}
	if err := f.fill(batch); err != nil {
		b.Fatal(err)
	}
	drain() // warm up
	b.ReportAllocs()
	b.ResetTimer()
	total := 0
	for range b.N {
		b.StopTimer()
		if err := f.fill(batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		total += drain()
	}
	if total != b.N*batch {
		b.Fatalf("read %d records, wrote %d", total, b.N*batch)
	}
	reportEvents(b, total)
}

func reportEvents(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
}
