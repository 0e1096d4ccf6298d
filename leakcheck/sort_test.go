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
