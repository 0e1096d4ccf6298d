package tracer

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/memtrace/memtrace/internal/tracer/bpftest"
)

// These tests run the BPF programs' own draw and sampling decision
// (bpf/sample.h) through BPF_PROG_TEST_RUN (syscall programs in the test
// object, tracer/bpftest): the code under test is what the probes run, not
// a Go copy of it.

const testDraws = 1 << 16

// needBPF skips without root (fails under CI=true, where a skip would
// hide a broken pipeline).
func needBPF(t testing.TB) {
	t.Helper()
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "needs root"
	default:
		if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
			why = "the kernel has no BTF"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s: the BPF tests must run in CI", why)
	}
	t.Skip(why)
}

func loadTest(t *testing.T, sampleBytes uint64) *bpftest.SamplingObjects {
	t.Helper()
	needBPF(t)
	spec, err := bpftest.LoadSampling()
	if err != nil {
		t.Fatal(err)
	}
	if err := setSampling(spec, sampleBytes); err != nil {
		t.Fatal(err)
	}
	var objs bpftest.SamplingObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatalf("load test programs: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}

func readDraws(t *testing.T, m *ebpf.Map) []uint64 {
	t.Helper()
	out := make([]uint64, testDraws)
	keys := make([]uint32, testDraws)
	for i := range keys {
		keys[i] = uint32(i)
	}
	var cursor ebpf.MapBatchCursor
	n, err := m.BatchLookup(&cursor, keys, out, nil)
	if n != testDraws {
		t.Fatalf("read draws: got %d of %d: %v", n, testDraws, err)
	}
	return out
}

// TestExpDraw checks the BPF exponential draw: its mean, its whole shape
// (Kolmogorov–Smirnov against Exp(1)), its tail past the table (the
// memoryless redraw) and its buckets (chi-square). Thresholds hold with
// probability above 1 - 10^-6 each for a correct Exp(1) draw.
func TestExpDraw(t *testing.T) {
	objs := loadTest(t, 1)
	if _, err := objs.DrawTest.Run(&ebpf.RunOptions{}); err != nil {
		t.Fatalf("run draw_test: %v", err)
	}
	raw := readDraws(t, objs.Draws)
	xs := make([]float64, len(raw))
	for i, r := range raw {
		xs[i] = float64(r) / ExpDrawOne
	}
	n := float64(len(xs))

	// Mean 1, standard error 1/sqrt(n) = 0.0039: allow 5 standard errors.
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / n
	if math.Abs(mean-1) > 5/math.Sqrt(n) {
		t.Errorf("mean %.5f, want 1 ± %.4f", mean, 5/math.Sqrt(n))
	}

	// Kolmogorov–Smirnov: sqrt(n)·D > 2.0 has probability 0.0007 for
	// a correct distribution (2.5: 10^-5).
	slices.Sort(xs)
	d := 0.0
	for i, x := range xs {
		f := 1 - math.Exp(-x)
		d = max(d, math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n))
	}
	if ks := math.Sqrt(n) * d; ks > 2.5 {
		t.Errorf("Kolmogorov–Smirnov statistic sqrt(n)·D = %.3f > 2.5: not Exp(1)", ks)
	}

	// The tail past ln 4096 (the redraw path): P = 1/4096, 16 expected.
	tail := 0
	for _, x := range xs {
		if x > math.Log(4096) {
			tail++
		}
	}
	if tail < 2 || tail > 40 {
		t.Errorf("%d draws above ln 4096, want about 16 (2..40)", tail)
	}

	// Chi-square over 64 equiprobable bins: 63 degrees of freedom, the
	// 10^-6 quantile is about 130.
	const bins = 64
	var count [bins]float64
	for _, x := range xs {
		b := int((1 - math.Exp(-x)) * bins)
		count[min(b, bins-1)]++
	}
	chi := 0.0
	for _, c := range count {
		e := n / bins
		chi += (c - e) * (c - e) / e
	}
	if chi > 130 {
		t.Errorf("chi-square %.1f over %d bins > 130: not Exp(1)", chi, bins)
	}
	t.Logf("n=%d mean=%.5f KS=%.3f tail=%d chi2=%.1f", len(xs), mean, math.Sqrt(n)*d, tail, chi)
}

// TestSampleDecision runs the probes' sampling decision (one thread's
// countdown) over allocations of mixed sizes and checks that each size is
// sampled with probability 1 - e^(-size/N), within 5 standard errors.
func TestSampleDecision(t *testing.T) {
	const N = 4096
	objs := loadTest(t, N)
	sizes := []uint64{0, 64, 512, 4096, 16384, 1 << 20}
	in := make([]uint64, testDraws)
	for i := range in {
		in[i] = sizes[i%len(sizes)]
	}
	keys := make([]uint32, testDraws)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := objs.Draws.BatchUpdate(keys, in, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := objs.SampleTest.Run(&ebpf.RunOptions{}); err != nil {
		t.Fatalf("run sample_test: %v", err)
	}
	out := readDraws(t, objs.Draws)
	for j, s := range sizes {
		hits, total := 0.0, 0.0
		for i := j; i < len(out); i += len(sizes) {
			hits += float64(out[i])
			total++
		}
		eff := float64(max(s, 1))
		p := -math.Expm1(-eff / N)
		se := math.Sqrt(p * (1 - p) / total)
		got := hits / total
		if math.Abs(got-p) > 5*se+1e-9 {
			t.Errorf("size %d: sampled %.5f of calls, want %.5f ± %.5f", s, got, p, 5*se)
		}
		t.Logf("size %7d: sampled %.5f, want %.5f (se %.5f)", s, got, p, se)
	}
}

// TestDrawBytesRounding checks that a countdown drawn with a mean of 512
// KiB (the default) is not confined to the draw's old resolution, mean /
// 65536 = 8 bytes: with it every draw was a multiple of 8, so that blocks
// of 1 to 7 bytes were never sampled and a 12-byte block was sampled as if
// it had 8. Each residue mod 8 must hold an eighth of the draws (chi-square
// over 8 classes, 7 degrees of freedom: the 10^-6 quantile is about 38),
// and the mean stays 512 KiB + 1/2 (rounded up) within 5 standard errors.
func TestDrawBytesRounding(t *testing.T) {
	const N = 512 << 10
	objs := loadTest(t, N)
	if _, err := objs.BytesTest.Run(&ebpf.RunOptions{}); err != nil {
		t.Fatalf("run bytes_test: %v", err)
	}
	out := readDraws(t, objs.Draws)
	var class [8]float64
	sum := 0.0
	for _, v := range out {
		class[v%8]++
		sum += float64(v)
	}
	n := float64(len(out))
	chi := 0.0
	for _, c := range class {
		chi += (c - n/8) * (c - n/8) / (n / 8)
	}
	if chi > 38 {
		t.Errorf("draws mod 8: %v, chi-square %.1f > 38: not spread over every byte", class, chi)
	}
	if mean, se := sum/n, N/math.Sqrt(n); math.Abs(mean-(N+0.5)) > 5*se {
		t.Errorf("mean draw %.0f, want %d ± %.0f", mean, N, 5*se)
	}
	t.Logf("draws mod 8: %v (chi-square %.1f), mean %.0f", class, chi, sum/n)
}

func TestExpTable(t *testing.T) {
	tab := ExpTable()
	if tab[1<<ExpBits] != 0 {
		t.Errorf("-ln 1 = %d, want 0", tab[1<<ExpBits])
	}
	if got, want := float64(tab[1])/ExpOne, math.Log(4096); math.Abs(got-want) > 1e-4 {
		t.Errorf("-ln(1/4096) = %f, want %f", got, want)
	}
	for i := 2; i <= 1<<ExpBits; i++ {
		if tab[i] >= tab[i-1] {
			t.Fatalf("table not decreasing at %d", i)
		}
	}
}

// TestRefaultSlot checks that user space's refault slot (Uncharge) is the
// probes' own (bpf/refault.h), at the smallest, a middle and the largest
// array: each slot i of draws goes in as an address of process i + 1000
// and comes out as its slot.
func TestRefaultSlot(t *testing.T) {
	for _, bits := range []uint32{refaultBitsMin, 20, refaultBitsMax} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) {
			needBPF(t)
			spec, err := bpftest.LoadSampling()
			if err != nil {
				t.Fatal(err)
			}
			if err := spec.Variables["test_refault_bits"].Set(bits); err != nil {
				t.Fatal(err)
			}
			var objs bpftest.SamplingObjects
			if err := spec.LoadAndAssign(&objs, nil); err != nil {
				t.Fatalf("load test programs: %v", err)
			}
			defer objs.Close()
			in := make([]uint64, testDraws)
			keys := make([]uint32, testDraws)
			for i := range in {
				keys[i] = uint32(i)
				// Pages across the address space, with low bits the hash ignores.
				in[i] = uint64(i)*0x9e3779b97f4a7c15>>16 | uint64(i&0xfff)
			}
			if _, err := objs.Draws.BatchUpdate(keys, in, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := objs.RefaultTest.Run(&ebpf.RunOptions{}); err != nil {
				t.Fatalf("run refault_test: %v", err)
			}
			out := readDraws(t, objs.Draws)
			seen := map[uint64]bool{}
			for i, got := range out {
				if want := uint64(refaultSlot(uint32(i+1000), in[i], bits)); got != want {
					t.Fatalf("address %#x of process %d: probes' slot %d, user space's %d", in[i], i+1000, got, want)
				}
				if got >= 1<<bits {
					t.Fatalf("slot %d past the array's %d", got, 1<<bits)
				}
				seen[got] = true
			}
			// 65536 pages spread over 2^bits slots: occupied nearly as by
			// chance (1 - e^-load; a region's pages share a window of 512
			// slots, which clusters them: 0.91 of chance at 2^16 slots).
			n := float64(uint64(1) << bits)
			want := n * -math.Expm1(-float64(testDraws)/n)
			if float64(len(seen)) < 0.85*want {
				t.Errorf("%d pages in %d slots of %.0f, want about %.0f", testDraws, len(seen), n, want)
			}
		})
	}
}

// TestRefaultBits: the refault array grows with the machine's memory over
// the sampling mean, within its bounds.
func TestRefaultBits(t *testing.T) {
	tests := []struct {
		mem, resident uint64
		want          uint32
	}{
		{16 << 30, 64 << 10, 19}, // 256K pages sampled at most: 512K slots, 4 MiB
		{23 << 30, 64 << 10, 20},
		{64 << 30, 64 << 10, 21},
		{1 << 40, 64 << 10, refaultBitsMax},
		{1 << 30, 1 << 30, refaultBitsMin},
		{16 << 30, 4 << 10, refaultBitsMax},
		{16 << 30, 0, refaultBitsMax},
	}
	for _, tc := range tests {
		if got := refaultBits(tc.mem, tc.resident); got != tc.want {
			t.Errorf("refaultBits(%d, %d) = %d, want %d", tc.mem, tc.resident, got, tc.want)
		}
	}
}
