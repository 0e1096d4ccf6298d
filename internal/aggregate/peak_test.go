package aggregate

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/event"
)

func TestPeakTolerance(t *testing.T) {
	tests := []struct {
		tol  PeakTolerance
		peak uint64
		want uint64
	}{
		{PeakTolerance{Bytes: 4096}, 1 << 30, 4096},
		{PeakTolerance{PPM: 10000}, 35 << 20, 367001},
		{PeakTolerance{PPM: 10000}, 99, 0},
		{PeakTolerance{PPM: 1e6}, 1 << 62, 1 << 62},
		{PeakTolerance{Bytes: 10, PPM: 500000}, 100, 60},
	}
	for _, tc := range tests {
		if got := tc.tol.of(tc.peak); got != tc.want {
			t.Errorf("%+v.of(%d) = %d, want %d", tc.tol, tc.peak, got, tc.want)
		}
	}
}

// The kept snapshot is within T of the true peak, per site, whatever the
// shape of the run; and a flat or falling heap takes no snapshots.
func TestPeakSnapshot(t *testing.T) {
	const a, b = 0x401000, 0x402000
	tb := NewTable()
	tb.SetPeakTolerance(PeakTolerance{Bytes: 1000})
	addr := uint64(0x10000)
	alloc := func(site, size uint64) uint64 {
		addr += 0x1000
		tb.Apply(&event.Event{PID: 1, Kind: event.Alloc, Addr: addr, Size: size, CallSite: site, StackID: -1, Time: addr})
		return addr
	}
	free := func(at uint64) { tb.Apply(&event.Event{PID: 1, Kind: event.Free, Addr: at, Time: addr}) }

	// 30 blocks of 100 at a, freed: peak 3000 on the way.
	var blocks []uint64
	for range 30 {
		blocks = append(blocks, alloc(a, 100))
	}
	for _, p := range blocks {
		free(p)
	}
	// Then 20 of 100 at a and 15 of 100 at b together: peak 3500.
	blocks = nil
	for range 20 {
		blocks = append(blocks, alloc(a, 100))
	}
	for range 15 {
		blocks = append(blocks, alloc(b, 100))
	}
	taken := tb.PeakSnapshots(1)
	for _, p := range blocks {
		free(p)
	}
	// Churn below the peak takes no snapshot.
	for range 100 {
		free(alloc(b, 100))
	}
	s := tb.Snapshot().Processes[0]
	pk := s.Peak
	if s.PeakLiveBytes != 3500 || pk.Tolerance != 1000 || pk.LiveBytes > 3500 || pk.LiveBytes+1000 < 3500 {
		t.Fatalf("peak %d, snapshot %+v", s.PeakLiveBytes, pk)
	}
	if pk.Snapshots != taken || tb.PeakSnapshots(1) != taken {
		t.Errorf("snapshots %d after the peak, %d before", pk.Snapshots, taken)
	}
	live := map[uint64]uint64{}
	for _, site := range pk.Sites {
		live[site.Address] = site.LiveBytes
	}
	if live[a] > 2000 || live[a]+1000 < 2000 || live[b] > 1500 || live[b]+1000 < 1500 || live[a]+live[b] != pk.LiveBytes {
		t.Errorf("sites at the peak %v, want about %d and %d adding up to %d", live, 2000, 1500, pk.LiveBytes)
	}

	exact := NewTable()
	exact.SetPeakTolerance(PeakTolerance{})
	for i := range 10 {
		exact.Apply(&event.Event{PID: 1, Kind: event.Alloc, Addr: uint64(0x1000 * (i + 1)), Size: 10, CallSite: a, StackID: -1})
	}
	if pk := exact.Snapshot().Processes[0].Peak; pk.LiveBytes != 100 || pk.Snapshots != 10 {
		t.Errorf("tolerance 0: snapshot %+v, want every allocation's", pk)
	}
}

// In sampled mode the snapshot keeps the standard errors of its moment:
// the process's and each site's, as a snapshot of the table then gave them.
func TestPeakSnapshotSampled(t *testing.T) {
	const a, b = 0x401000, 0x402000
	tb := NewTable()
	tb.SetSampleBytes(4096)
	tb.SetPeakTolerance(PeakTolerance{})
	apply := func(kind event.Kind, addr, size, site uint64) {
		tb.Apply(&event.Event{PID: 1, Kind: kind, Addr: addr, Size: size, CallSite: site, StackID: -1, Time: addr})
	}
	for i := range uint64(8) {
		apply(event.Alloc, 0x10000+i*0x100, 100+i, a)
	}
	apply(event.Alloc, 0x20000, 700, b)
	then := tb.Snapshot().Processes[0] // at the peak
	apply(event.Free, 0x10000, 0, 0)   // a changes, b does not
	apply(event.Alloc, 0x30000, 10, a) // below the peak: no snapshot
	pk := tb.Snapshot().Processes[0].Peak
	if pk.LiveBytes != then.Heap.LiveBytes || pk.LiveBytesStderr != then.LiveBytesStderr || pk.LiveBytesStderr == 0 {
		t.Errorf("peak live %d ± %g, want %d ± %g", pk.LiveBytes, pk.LiveBytesStderr, then.Heap.LiveBytes, then.LiveBytesStderr)
	}
	want := map[uint64]float64{}
	for _, s := range then.Sites {
		want[s.Address] = s.LiveBytesStderr
	}
	for _, s := range pk.Sites {
		if s.LiveBytesStderr != want[s.Address] || s.LiveBytesStderr == 0 {
			t.Errorf("site %#x: stderr %g at the peak, want %g", s.Address, s.LiveBytesStderr, want[s.Address])
		}
	}
	if len(pk.Sites) != 2 {
		t.Errorf("%d sites at the peak, want 2", len(pk.Sites))
	}
}

func TestMarks(t *testing.T) {
	tb := NewTable()
	tb.Mark(7, "a", 10)
	tb.Mark(8, "x", 11)
	tb.Mark(7, "b", 12)
	got := tb.Snapshot().Marks
	want := []Mark{{7, "a", 1, 10}, {8, "x", 1, 11}, {7, "b", 2, 12}}
	if len(got) != len(want) {
		t.Fatalf("marks %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mark %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// A forgotten process's marks are no one's; its PID's next process
	// numbers its own from 1.
	tb.Forget(7)
	tb.Mark(7, "c", 13)
	got = tb.Snapshot().Marks
	want = []Mark{{0, "a", 1, 10}, {8, "x", 1, 11}, {0, "b", 2, 12}, {7, "c", 1, 13}}
	if !slices.Equal(got, want) {
		t.Errorf("after Forget: marks %+v, want %+v", got, want)
	}
}

// BenchmarkPeakGrowth is the peak snapshot's cost where it is highest: a
// heap that only grows (each op: 1 M allocations over 4000 call sites,
// 64 B to 4 KiB), at the default 1% and with no snapshots at all.
func BenchmarkPeakGrowth(b *testing.B) {
	evs := make([]event.Event, 1_000_000)
	for i := range evs {
		evs[i] = event.Event{PID: 1, Kind: event.Alloc, Addr: uint64(0x1000 + 16*i), Size: uint64(64 << (i % 7)),
			CallSite: 0x400000 + uint64(i*7919%4000)*8, StackID: -1}
	}
	for _, tc := range []struct {
		name string
		tol  PeakTolerance
	}{{"1%", DefaultPeakTolerance}, {"none", PeakTolerance{Bytes: 1 << 62}}} {
		b.Run(tc.name, func(b *testing.B) {
			run := func() uint64 {
				tb := NewTable()
				tb.SetPeakTolerance(tc.tol)
				for i := range evs {
					tb.Apply(&evs[i])
				}
				return tb.PeakSnapshots(1)
			}
			run() // the Go heap grown to the table's size, whichever runs first
			var snaps uint64
			cpu0 := cpuTime()
			for b.Loop() {
				snaps = run()
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*len(evs)), "cpu-ns/event")
			b.ReportMetric(float64(snaps), "snapshots")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
