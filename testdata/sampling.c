/*
 * sampling.c: the statistical fixture of sampled mode. Deterministic (a
 * fixed-seed xorshift generator): two functions leak tens of MB in varied
 * sizes, a third allocates and frees as much again, and some leaked blocks
 * are grown with realloc. It prints the truth to stderr, one line:
 *
 *   truth small_live=N small_blocks=N large_live=N large_blocks=N allocs=N alloc_bytes=N
 *
 * small_* and large_* are the live bytes and blocks at exit allocated by
 * leak_small and leak_large (realloc'ed blocks count for the function that
 * realloc'ed them), allocs and alloc_bytes every successful allocation
 * call of the program and the bytes requested (realloc included), which
 * sampled mode must count exactly.
 *
 * Usage: sampling [SCALE]   (SCALE multiplies the volumes, default 1)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE __attribute__((noipa))

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t allocs, alloc_bytes;
static uint64_t small_live, small_blocks, large_live, large_blocks;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A size in [lo, hi), spread evenly on a log scale. */
static size_t size_between(size_t lo, size_t hi)
{
	double u = (double)(next() >> 11) / (double)(1ULL << 53);
	double l = __builtin_log((double)lo), h = __builtin_log((double)hi);
	size_t s = (size_t)__builtin_exp(l + u * (h - l));
	return s < lo ? lo : s >= hi ? hi - 1 : s;
}

static void *counted(void *p, size_t n)
{
	if (!p)
		abort();
	allocs++;
	alloc_bytes += n;
	memset(p, 1, n < 64 ? n : 64);
	return p;
}

/* Leaks about 25 MB in 16 B .. 4 KiB blocks; every 8th block is then
 * grown to twice its size with realloc. */
FIXTURE void leak_small(long scale, void **keep, long *kept)
{
	for (long i = 0; i < 30000 * scale; i++) {
		size_t n = size_between(16, 4096);
		void *p = counted(malloc(n), n);
		if (i % 8 == 0) {
			p = counted(realloc(p, 2 * n), 2 * n);
			n *= 2;
		}
		keep[(*kept)++] = p;
		small_live += n;
		small_blocks++;
	}
}

/* Leaks about 35 MB in 4 KiB .. 256 KiB blocks. */
FIXTURE void leak_large(long scale, void **keep, long *kept)
{
	for (long i = 0; i < 600 * scale; i++) {
		size_t n = size_between(4096, 256 << 10);
		keep[(*kept)++] = counted(malloc(n), n);
		large_live += n;
		large_blocks++;
	}
}

/* Allocates and frees about 50 MB: nothing of it stays live. */
FIXTURE void churn(long scale)
{
	for (long i = 0; i < 25000 * scale; i++) {
		size_t n = size_between(16, 8192);
		void *p = counted(calloc(1, n), n);
		free(p);
	}
}

int main(int argc, char **argv)
{
	long scale = argc > 1 ? atol(argv[1]) : 1;
	long kept = 0;
	void **keep;
	char line[256];
	int len;

	if (scale < 1)
		scale = 1;
	/* Not counted: it is not the program's workload, but it is an
	 * allocation call all the same. */
	keep = malloc(sizeof(void *) * (30000 + 600) * scale);
	allocs++;
	alloc_bytes += sizeof(void *) * (30000 + 600) * scale;
	for (int round = 0; round < 4; round++) {
		churn(scale);
		leak_small(scale / 4 + (round < scale % 4), keep, &kept);
		leak_large(scale / 4 + (round < scale % 4), keep, &kept);
	}
	/* snprintf and write(2): stdio buffers would be allocations too. */
	len = snprintf(line, sizeof(line),
		       "truth small_live=%llu small_blocks=%llu large_live=%llu large_blocks=%llu allocs=%llu alloc_bytes=%llu\n",
		       (unsigned long long)small_live, (unsigned long long)small_blocks,
		       (unsigned long long)large_live, (unsigned long long)large_blocks,
		       (unsigned long long)allocs, (unsigned long long)alloc_bytes);
	if (write(2, line, len) != len)
		return 1;
	return 0;
}
