/*
 * chaincost.c: the cost of the charging walk by the length of the chain
 * (scripts/chain-cost.sh). Linked with wraplib.c, stripped. Runs PAIRS
 * allocate+free pairs, each allocation made
 *   named:   by malloc from this program's named code (charged at once),
 *   wrapper: through xmalloc and its unnamed helper (charged 2 frames up),
 *   deep:    through deep_alloc's ten unnamed steps (charged 12 frames up),
 * and prints the process's CPU time per pair in ns (the traps are the
 * process's own system time).
 * Usage: chaincost PAIRS named|wrapper|deep
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *xmalloc(unsigned long n);
void *deep_alloc(unsigned long n);

void *volatile sink;

int main(int argc, char **argv)
{
	struct timespec a, b;
	long pairs;
	int mode;

	if (argc != 3 || (pairs = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: chaincost PAIRS named|wrapper|deep\n");
		return 2;
	}
	mode = !strcmp(argv[2], "named") ? 0 : !strcmp(argv[2], "wrapper") ? 1 : !strcmp(argv[2], "deep") ? 2 : -1;
	if (mode < 0) {
		fprintf(stderr, "chaincost: unknown mode %s\n", argv[2]);
		return 2;
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (long i = 0; i < pairs; i++) {
		sink = mode == 0 ? malloc(64) : mode == 1 ? xmalloc(64) : deep_alloc(64);
		free(sink);
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / pairs);
	return 0;
}
