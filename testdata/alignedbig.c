/* alignedbig.c: large aligned blocks, which glibc takes from mmap, and
 * which its memalign family makes through an unnamed helper that it
 * tail-calls (and that tail-calls malloc for small alignments, at the
 * same stack pointer). 100 each of aligned_alloc, memalign(16, ...),
 * valloc and malloc, all kept: 400 allocation calls, no mapping of the
 * program's own. */
#include <malloc.h>
#include <stdlib.h>

void *volatile keep[400];

int main(void)
{
	for (int i = 0; i < 100; i++)
		keep[i] = aligned_alloc(64, 200000 + 64 * i);
	for (int i = 0; i < 100; i++)
		keep[100 + i] = memalign(16, 150000 + 16 * i);
	for (int i = 0; i < 100; i++)
		keep[200 + i] = valloc(300000 + 4096 * i);
	for (int i = 0; i < 100; i++)
		keep[300 + i] = malloc(250000 + i);
	return 0;
}
