/*
 * A pointer kept in the program's own mapping, which the kernel merges
 * with the mapping of an mmapped malloc chunk placed right below it (one
 * line of /proc/PID/maps). Both blocks are still reachable, as valgrind
 * says; memtrace called keep_in_mapping's definitely lost while it took
 * the merged mapping for the allocator's whole. Prints "merged 1" (to stderr) when the
 * two mappings did merge (else the case was not made).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void **region;
static void *big;

__attribute__((noinline)) void keep_in_mapping(void)
{
	region = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	region[10] = malloc(100); // @site keep_in_mapping
	memset(region[10], 1, 100);
	/* The only pointer to the mapping is hidden: it is a root itself, not a block. */
	region = (void **)((uintptr_t)region ^ 1);
}

__attribute__((noinline)) void keep_big(void)
{
	big = malloc(256 * 1024); // @site keep_big (above the mmap threshold: a chunk of its own)
	memset(big, 0, 256 * 1024);
}

int main(void)
{
	char line[256];
	unsigned long lo, hi, r, b;
	int merged = 0;
	FILE *f;

	keep_in_mapping();
	keep_big();
	r = (uintptr_t)region & ~1UL;
	b = (uintptr_t)big;
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= r && r < hi && lo <= b && b < hi)
			merged = 1;
	if (f)
		fclose(f);
	fprintf(stderr, "merged %d\n", merged); /* stdout is the tests' JSON */
	return 0;
}
