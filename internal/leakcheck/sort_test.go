package leakcheck

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestSortByAddr: the parallel sort agrees with a plain one, whatever the
// layout and the number of cores.
func TestSortByAddr(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		name string
		addr func(i int) uint64
	}{
		{"shuffled heap", func(i int) uint64 { return 0x5555_0000_0000 + uint64(i)*48 }},
		{"two arenas", func(i int) uint64 { return 0x7f00_0000_0000*uint64(i%2) + 0x1000 + uint64(i)*64 }},
		{"random", func(int) uint64 { return rng.Uint64() >> 17 }},
	} {
		for _, n := range []int{0, 1, 100, minParallelSort + 1, 300_000} {
			b := make([]Block, n)
			for i := range b {
				b[i] = Block{Addr: tc.addr(i), Size: uint64(i)}
			}
			rng.Shuffle(n, func(i, j int) { b[i], b[j] = b[j], b[i] })
			want := slices.Clone(b)
			slices.SortFunc(want, cmpAddr)
			SortByAddr(b)
			if !slices.Equal(b, want) {
				t.Errorf("%s, %d blocks: not sorted as slices.SortFunc sorts", tc.name, n)
			}
		}
	}
}

// BenchmarkSortByAddr sorts 5 million blocks in a live table's order (a
// hash's): on one core, and as SortByAddr does, on every core.
func BenchmarkSortByAddr(b *testing.B) {
	const n = 5_000_000
	rng := rand.New(rand.NewPCG(11, 12))
	src := make([]Block, n)
	for i := range src {
		src[i] = Block{Addr: 0x5555_0000_0000 + uint64(i)*64, Size: 48}
	}
	rng.Shuffle(n, func(i, j int) { src[i], src[j] = src[j], src[i] })
	blk := make([]Block, n)
	for _, tc := range []struct {
		name string
		sort func([]Block)
	}{
		{"slices.SortFunc", func(b []Block) { slices.SortFunc(b, cmpAddr) }},
		{"SortByAddr", SortByAddr},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				copy(blk, src)
				tc.sort(blk)
			}
		})
	}
}
