/* mapsafter.c: anonymous mappings the program makes itself right after a
 * small malloc, whose return sampled mode skips (uprobe sessions): the
 * mappings are the program's, not the allocator's, and must all count.
 * Each round mallocs 16 bytes, then maps a page from a deeper frame (below
 * the malloc's stack pointer, where an mmap inside malloc would also be)
 * and one from the same frame, frees the block and unmaps both. Prints "maps=N" (the
 * mappings made) to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define ROUNDS 100

void *volatile sink;

/* noipa, and a frame of its own below the caller's, kept through the
 * call: the mmap's sp is under the malloc's. */
__attribute__((noipa)) static void *deeper_map(void)
{
	char volatile pad[256];

	void *p;

	pad[0] = 1;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pad[1] = 2; /* after the call: no tail call, the frame stays */
	return p;
}

int main(void)
{
	int maps = 0;

	for (int i = 0; i < ROUNDS; i++) {
		void *deep, *same;

		sink = malloc(16);
		deep = deeper_map();
		same = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		free(sink);
		if (deep == MAP_FAILED || same == MAP_FAILED)
			return 1;
		maps += 2;
		munmap(deep, 4096);
		munmap(same, 4096);
	}
	fprintf(stderr, "maps=%d\n", maps);
	return 0;
}
