/*
 * writeheavy.c: the access statistics bench's traced program (bench/access.go).
 * It allocates argv[1] MiB (default 1024) in blocks of 1 MiB and rewrites
 * all of them argv[2] times (default 40), a word per cache line: every page
 * is written again and again, as --access's clearing of accessed bits (and
 * soft-dirty's write faults, where the kernel has it) would slow most.
 * It prints the sum it read, then on stderr the wall and CPU seconds of
 * the rewriting alone ("rewrite 1.234 s wall 1.200 s cpu"), so that a
 * tool's start-up and report are not counted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 1024;
	long passes = argc > 2 ? atol(argv[2]) : 40;
	unsigned long **blocks = malloc(mib * sizeof *blocks);
	if (!blocks)
		return 1;
	for (long i = 0; i < mib; i++)
		if (!(blocks[i] = malloc(1 << 20)))
			return 1;
	unsigned long sum = 0;
	double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
	for (long p = 0; p < passes; p++)
		for (long i = 0; i < mib; i++)
			for (long w = 0; w < (1 << 20) / 8; w += 8) {
				blocks[i][w] = p + w;
				sum += blocks[i][w ^ 8];
			}
	wall = seconds(CLOCK_MONOTONIC) - wall;
	cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
	printf("%lu\n", sum);
	fprintf(stderr, "rewrite %.3f s wall %.3f s cpu\n", wall, cpu);
	return 0;
}
