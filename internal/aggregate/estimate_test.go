package aggregate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

func TestSampleWeight(t *testing.T) {
	for _, c := range []struct {
		size, n uint64
		want    float64
	}{
		{1000, 1000, 1 / (1 - math.Exp(-1))},
		{0, 1000, 1 / (1 - math.Exp(-0.001))}, // counts as one byte
		{1 << 30, 4096, 1},
		{5, 0, 1}, // exact
	} {
		if got := SampleWeight(c.size, c.n); math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("SampleWeight(%d, %d) = %g, want %g", c.size, c.n, got, c.want)
		}
	}
}

// TestSampledFigures: one sampled block, then its free, with the weights
// worked out by hand; the exact counts replace the estimates.
func TestSampledFigures(t *testing.T) {
	tb := NewTable()
	tb.SetSampleBytes(1000)
	applyAll(tb, []event.Event{alloc(blockA, 1000, site1), alloc(blockB, 3000, site2)})
	w1, w3 := 1/(1-math.Exp(-1)), 1/(1-math.Exp(-3))
	s := tb.Snapshot()
	p := processOf(t, s, testPID)
	if s.SampleBytes != 1000 {
		t.Errorf("SampleBytes = %d", s.SampleBytes)
	}
	wantLive := 1000*w1 + 3000*w3
	if p.Heap.LiveBytes != uint64(math.Round(wantLive)) || p.Heap.LiveAllocs != uint64(math.Round(w1+w3)) {
		t.Errorf("live %d in %d, want %.0f in %.0f", p.Heap.LiveBytes, p.Heap.LiveAllocs, wantLive, w1+w3)
	}
	wantSE := math.Sqrt(1000*1000*w1*(w1-1) + 3000*3000*w3*(w3-1))
	if math.Abs(p.LiveBytesStderr-wantSE) > 1e-6 {
		t.Errorf("stderr %f, want %f", p.LiveBytesStderr, wantSE)
	}
	if p.CountsExact {
		t.Error("counts exact before SetExactCounts")
	}
	tb.SetExactCounts(testPID, 17, 12345)
	applyAll(tb, []event.Event{free(blockA)})
	p = processOf(t, tb.Snapshot(), testPID)
	if !p.CountsExact || p.Heap.Allocs != 17 || p.Heap.AllocBytes != 12345 {
		t.Errorf("exact counts: %+v", p)
	}
	if p.Heap.LiveBytes != uint64(math.Round(3000*w3)) || p.Heap.FreedBytes != uint64(math.Round(1000*w1)) {
		t.Errorf("after free: %+v", p.Heap)
	}
	for _, st := range p.Sites {
		if st.Address == site1 && (st.LiveBytes != 0 || st.LiveAllocs != 0 || st.LiveBytesStderr != 0) {
			t.Errorf("site 1 after its only block was freed: %+v", st)
		}
	}
	// A process whose allocations were all unsampled is still reported.
	tb.SetExactCounts(99, 3, 30)
	if p := processOf(t, tb.Snapshot(), 99); p.Heap.Allocs != 3 || p.Heap.AllocBytes != 30 {
		t.Errorf("unsampled process: %+v", p.Heap)
	}
}

// TestEstimatorIsUnbiased simulates the probes' sampling (each allocation
// sampled with probability 1 - e^(-s/N), independently) over a fixed
// population of blocks, many times, and checks that the live-byte
// estimate's errors, in units of its own standard error, have mean 0 and
// standard deviation 1.
func TestEstimatorIsUnbiased(t *testing.T) {
	const (
		n      = 65536
		blocks = 4000
		runs   = 400
	)
	pop := rand.New(rand.NewPCG(1, 2))
	type block struct {
		size  uint64
		freed bool
		site  uint64
	}
	bs := make([]block, blocks)
	var truth [2]float64 // live bytes per site
	for i := range bs {
		// Sizes spread over 16 B .. 1 MiB, log-uniform.
		bs[i] = block{size: uint64(math.Exp(pop.Float64()*math.Log(1<<16))) * 16, freed: pop.IntN(3) == 0, site: uint64(i % 2)}
		if !bs[i].freed {
			truth[i%2] += float64(bs[i].size)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var sum, sumSq [2]float64
	for range runs {
		tb := NewTable()
		tb.SetSampleBytes(n)
		var evs []event.Event
		for i, b := range bs {
			if rng.Float64() >= -math.Expm1(-float64(b.size)/n) {
				continue
			}
			addr := uint64(0x1000 + 16*i)
			evs = append(evs, alloc(addr, b.size, site1+b.site))
			if b.freed {
				evs = append(evs, free(addr))
			}
		}
		applyAll(tb, evs)
		for _, st := range processOf(t, tb.Snapshot(), testPID).Sites {
			k := st.Address - site1
			z := (float64(st.LiveBytes) - truth[k]) / st.LiveBytesStderr
			sum[k] += z
			sumSq[k] += z * z
		}
	}
	for k := range 2 {
		mean := sum[k] / runs
		sd := math.Sqrt(sumSq[k]/runs - mean*mean)
		t.Logf("site %d: truth %.0f bytes; z mean %.3f sd %.3f over %d runs", k, truth[k], mean, sd, runs)
		if math.Abs(mean) > 4/math.Sqrt(runs) {
			t.Errorf("site %d: mean error %.3f standard errors: biased", k, mean)
		}
		if sd < 0.85 || sd > 1.15 {
			t.Errorf("site %d: errors spread %.3f standard errors, want 1", k, sd)
		}
	}
}
