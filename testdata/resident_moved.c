/*
 * resident_moved.c: resident pages that move with their mapping. glibc's
 * realloc moves a block it mapped itself with an mremap inside the call
 * (fill_a's 64 MiB, then fill_b writes the 64 MiB the block grew by); the
 * program's own mremap moves fill_c's 32 MiB to a place it chose. Each
 * function keeps what it made resident: 64, 64 and 32 MiB. It says
 * whether each block moved (both must, or the test proves nothing).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1 << 20)

void *volatile sink;

__attribute__((noipa)) void fill_a(char *p, size_t n)
{
	memset(p, 1, n);
	sink = p;
}

__attribute__((noipa)) void fill_b(char *p, size_t n)
{
	memset(p, 2, n);
	sink = p;
}

__attribute__((noipa)) void fill_c(char *p, size_t n)
{
	memset(p, 3, n);
	sink = p;
}

int main(void)
{
	char *a = malloc(64 * MIB), *b, *c, *to, *moved;

	if (!a)
		return 1;
	fill_a(a, 64 * MIB);
	b = realloc(a, 128 * MIB);
	if (!b)
		return 1;
	printf("realloc moved %d\n", b != a);
	fill_b(b + 64 * MIB, 64 * MIB);

	c = mmap(0, 32 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	to = mmap(0, 32 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED || to == MAP_FAILED)
		return 1;
	fill_c(c, 32 * MIB);
	moved = mremap(c, 32 * MIB, 32 * MIB, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	if (moved == MAP_FAILED)
		return 1;
	printf("mremap moved %d\n", moved != c);
	fflush(stdout);
	sink = moved;
	return 0;
}
