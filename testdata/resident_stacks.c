/*
 * Resident stacks fixture: one function, fill, writes (and so makes
 * resident) every block, called from two paths: from_a keeps 32 MiB,
 * from_b 16 MiB. Without --detail both are one row, fill; with it, two
 * rows of fill, told apart by their stacks.
 */
#include <stdlib.h>

#define MiB (1UL << 20)

char *volatile keep[2]; /* kept to the end: the compiler must not drop them */

__attribute__((noinline)) void fill(char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
}

__attribute__((noinline)) void from_a(void)
{
	char *p = malloc(32 * MiB);

	fill(p, 32 * MiB);
	keep[0] = p;
}

__attribute__((noinline)) void from_b(void)
{
	char *p = malloc(16 * MiB);

	fill(p, 16 * MiB);
	keep[1] = p;
}

int main(void)
{
	from_a();
	from_b();
	return 0;
}
