/*
 * Resident attribution fixture: heap made resident only by malloc itself.
 * small_blocks makes argv[1] (default 262144) blocks of 24 bytes and never
 * writes them: each heap page is first written by malloc's own header
 * writes (_int_malloc splitting the top chunk), inside the call, so the
 * fault is charged past malloc to small_blocks. 32-byte chunks: 8 MiB.
 */
#include <stdlib.h>
#include <sys/prctl.h>

void *volatile keep; /* the compiler must not drop the blocks */

__attribute__((noinline)) void small_blocks(long n)
{
	for (long i = 0; i < n; i++)
		keep = malloc(24);
}

int main(int argc, char **argv)
{
	/* No transparent huge pages: see resident.c. */
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	small_blocks(argc > 1 ? atol(argv[1]) : 262144);
	return 0;
}
