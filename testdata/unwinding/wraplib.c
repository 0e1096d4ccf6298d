/*
 * wraplib.c: a library of allocation wrappers, stripped by the test (only
 * its exported names remain): xmalloc follows the automatic rule's naming,
 * my_alloc does not, and both reach malloc through a static helper that
 * stripping leaves unnamed.
 */
#include <stdlib.h>

void *volatile wrap_sink;

__attribute__((noipa)) static void *grab(unsigned long n)
{
	void *p = malloc(n);

	wrap_sink = p; /* not a tail call */
	return p;
}

__attribute__((noipa)) void *xmalloc(unsigned long n)
{
	void *p = grab(n);

	if (!p)
		abort();
	return p;
}

__attribute__((noipa)) void *my_alloc(unsigned long n)
{
	void *p = xmalloc(n);

	wrap_sink = p;
	return p;
}
