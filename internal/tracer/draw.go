package tracer

import "math"

// ExpBits is log2 of the number of buckets of the BPF exponential draw
// (EXP_BITS in bpf/sample.h).
const ExpBits = int(memtraceExpBitsEXP_BITS)

// ExpOne is 1.0 in the table's 16.16 fixed point.
const ExpOne = 1 << 16

// ExpDrawOne is 1.0 in the units of a draw (exp_draw): the table's 16
// fractional bits and the 32-ExpBits of the interpolation.
const ExpDrawOne = ExpOne << (32 - ExpBits)

// ExpTable returns the table the BPF programs draw exponentials from:
// entry i is -ln(i/4096) in 16.16 fixed point, rounded, for i = 1..4096
// (entry 0 is unused: the bottom bucket redraws). BPF has no floating
// point, so the loader computes it here and sets it before loading.
func ExpTable() [1<<ExpBits + 1]uint32 {
	var t [1<<ExpBits + 1]uint32
	n := float64(int(1) << ExpBits)
	for i := 1; i <= 1<<ExpBits; i++ {
		t[i] = uint32(math.Round(-math.Log(float64(i)/n) * ExpOne))
	}
	return t
}
