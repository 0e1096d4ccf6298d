//go:build ignore

/*
 * Test programs, in an object of their own that only tests load
 * (tracer/bpftest, used by tracer/draw_test.go): they run the probes'
 * exponential draw and sampling decision (sample.h), and the refault
 * slots' hash (refault.h), through BPF_PROG_TEST_RUN, so that the code
 * tested is the code the probes run.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "memtrace.h"
#include "sample.h"
#define REFAULT_INDEX_ONLY
#include "refault.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* One draw, or one sampling decision, per slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, __u64);
} draws SEC(".maps");

/* The draw test: one exp_draw() per slot of draws. */
static long draw_one(__u64 i, void *ctx)
{
	__u32 k = i;
	__u64 *v = bpf_map_lookup_elem(&draws, &k);

	if (v)
		*v = exp_draw();
	return 0;
}

SEC("syscall")
int draw_test(void *ctx)
{
	bpf_loop(1 << 16, draw_one, 0, 0);
	return 0;
}

/* The rounding test: one draw_bytes() (mean sample_bytes) per slot of draws. */
static long bytes_one(__u64 i, void *ctx)
{
	__u32 k = i;
	__u64 *v = bpf_map_lookup_elem(&draws, &k);

	if (v)
		*v = draw_bytes();
	return 0;
}

SEC("syscall")
int bytes_test(void *ctx)
{
	bpf_loop(1 << 16, bytes_one, 0, 0);
	return 0;
}

/*
 * The sampling test: each slot of draws holds an allocation size on input
 * and, on output, 1 if one thread's countdown sampled that allocation.
 */
static long sample_one(__u64 i, void *ctx)
{
	__u32 k = i;
	__u64 *v = bpf_map_lookup_elem(&draws, &k);

	if (v)
		*v = sample(ctx, *v);
	return 0;
}

SEC("syscall")
int sample_test(void *ctx)
{
	struct inflight s = {};

	bpf_loop(1 << 16, sample_one, &s, 0);
	return 0;
}


/* The refault test's number of slots, log2 (set by the test). */
const volatile __u32 test_refault_bits = 20;

/*
 * The refault test: each slot i of draws holds an address on input and,
 * on output, the refault slot of process i + 1000's page there.
 */
static long refault_one(__u64 i, void *ctx)
{
	__u32 k = i;
	__u64 *v = bpf_map_lookup_elem(&draws, &k);

	if (v)
		*v = refault_index(k + 1000, *v, test_refault_bits);
	return 0;
}

SEC("syscall")
int refault_test(void *ctx)
{
	bpf_loop(1 << 16, refault_one, 0, 0);
	return 0;
}
