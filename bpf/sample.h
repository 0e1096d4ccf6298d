/*
 * Sampled mode's decision, included by memtrace.bpf.c and by the test
 * object (test_sample.bpf.c), which runs it through BPF_PROG_TEST_RUN: the
 * code under test is the code the probes run.
 */
#ifndef MEMTRACE_SAMPLE_H
#define MEMTRACE_SAMPLE_H

/* The exponential draw's table: 2^EXP_BITS buckets of the uniform (tracer.ExpBits). */
enum exp_bits {
	EXP_BITS = 12,
};
#define EXP_TABLE_SIZE (1 << EXP_BITS)
#define EXP_FRAC_BITS (32 - EXP_BITS)
/* Redraws past the bottom bucket; each is taken with probability 2^-12. */
#define EXP_MAX_REDRAWS 4
/* Sizes above this are clamped in the countdown (no allocation is that big). */
#define SAMPLE_MAX_SIZE (1ULL << 62)

/* Set by the loader before load. */
/*
 * Sampled mode (--sample-bytes): the mean number of bytes between samples;
 * 0 = exact (every call is an event).
 */
const volatile __u64 sample_bytes = 0;
/*
 * -ln(i/4096) in 16.16 fixed point, i = 0..4096 (entry 0 unused): the
 * inverse CDF of Exp(1) at 4096 points. Set by the loader (tracer/draw.go).
 */
const volatile __u32 exp_table[EXP_TABLE_SIZE + 1] = {};

/*
 * exp_draw returns a draw from Exp(1) in units of 2^-EXP_DRAW_SHIFT,
 * without floating point: the top EXP_BITS bits of a random u32 pick a
 * bucket i of the uniform U, the other bits place U in it, and -ln U is
 * interpolated linearly between the table's -ln(i/4096) and
 * -ln((i+1)/4096), keeping all of those bits (a 16.16 result would make a
 * draw of mean 512 KiB a multiple of 8 bytes: see draw_bytes). U in the
 * bottom bucket (i = 0, where -ln has no bound) uses memorylessness: given
 * U < 1/4096, -ln U = ln 4096 + X' with X' ~ Exp(1) again, so it adds ln
 * 4096 and draws once more (bounded: 4 redraws in a row happen once in
 * 2^48 draws, and then the sum so far is kept).
 */
#define EXP_DRAW_SHIFT (16 + EXP_FRAC_BITS)

static __always_inline __u64 exp_draw(void)
{
	__u64 base = 0, hi, lo;
	__u32 r, i, f;

	for (int k = 0; k < EXP_MAX_REDRAWS; k++) {
		r = bpf_get_prandom_u32();
		i = r >> EXP_FRAC_BITS;
		f = r & ((1U << EXP_FRAC_BITS) - 1);
		if (i == 0) {
			base += (__u64)exp_table[1] << EXP_FRAC_BITS; /* ln 4096 */
			continue;
		}
		hi = exp_table[i];
		lo = exp_table[i + 1];
		return base + (hi << EXP_FRAC_BITS) - (hi - lo) * f;
	}
	return base;
}

/*
 * draw_mean returns a draw from Exp(mean), in bytes, rounded up: with
 * countdowns in whole bytes, P(draw <= s) is then P(X <= s) for the
 * exponential X itself. (Rounded down, or from a 16.16 draw, sizes were
 * sampled as if rounded to the draw's resolution, mean / 65536 bytes:
 * with 512 KiB a 7-byte block was never sampled, a 12-byte one as if 8.)
 * The resolution is now mean / 2^36 bytes. No overflow for mean <= 2^40:
 * exp_draw stays below 42 * 2^36. Not inlined (draws are rare): its
 * locals stay off the stack of the programs that also walk, which 6.1's
 * verifier counts with the walk's (512 bytes in all).
 */
static __noinline __s64 draw_mean(__u64 mean)
{
	__u64 e = exp_draw(), frac = e & ((1ULL << EXP_FRAC_BITS) - 1);
	__u64 x16 = (e >> EXP_FRAC_BITS) * mean + ((frac * mean) >> EXP_FRAC_BITS);

	return (__s64)((x16 + 0xffff) >> 16);
}

/* draw_bytes returns a draw from Exp(mean sample_bytes), in bytes. */
static __always_inline __s64 draw_bytes(void)
{
	return draw_mean(sample_bytes);
}

/*
 * sample decides whether an allocation of size bytes is sampled: the
 * thread's countdown of bytes to the next sample point drops by size, and
 * the allocation is sampled when a point falls inside it, which happens
 * with probability 1 - e^(-size/sample_bytes) independently of every other
 * allocation. Then the distance from its end to the next point is a fresh
 * draw (the exponential has no memory). Size 0 counts as 1 byte, so that
 * zero-size blocks are sampled (and weighed) too; user space weighs with
 * the same rule.
 */
static __always_inline int sample(struct inflight *s, __u64 size)
{
	__s64 n = size == 0 ? 1 : size > SAMPLE_MAX_SIZE ? SAMPLE_MAX_SIZE : size;

	if (!s->drawn) {
		s->countdown = draw_bytes();
		s->drawn = 1;
	}
	s->countdown -= n;
	if (s->countdown > 0)
		return 0;
	s->countdown = draw_bytes();
	return 1;
}

#endif
