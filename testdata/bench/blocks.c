/*
 * blocks.c: many small blocks (make bench's "blocks" section). Makes N
 * blocks of 16 to 79 bytes (default 5,000,000), frees every second one and
 * exits with the others live. Prints one line:
 *
 *   seconds=F blocks=N live=L
 *
 * seconds is the wall time of the loops alone.
 * Usage: blocks [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 5000000;
	struct timespec a, b;
	void **p;

	if (n < 1) {
		fprintf(stderr, "blocks: N must be > 0\n");
		return 2;
	}
	p = malloc(n * sizeof(*p));
	if (!p)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		p[i] = malloc(16 + (i * 7) % 64);
	for (long i = 0; i < n; i += 2)
		free(p[i]);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("seconds=%.3f blocks=%ld live=%ld\n",
	       (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, n, n / 2);
	return 0;
}
