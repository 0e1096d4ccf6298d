/*
 * wraplib.c: a library of allocation wrappers, stripped by the test (only
 * its exported names remain): xmalloc follows the automatic rule's naming,
 * my_alloc does not, and both reach malloc through a static helper that
 * stripping leaves unnamed. deep_alloc reaches xmalloc through ten static
 * functions, as SQLite's page cache reaches sqlite3Malloc: thirteen frames
 * from malloc to the first named caller that is no wrapper.
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

/* Each step is a static function of its own, unnamed once stripped. */
#define STEP(name, next)                                          \
	__attribute__((noipa)) static void *name(unsigned long n) \
	{                                                         \
		void *p = next(n);                                \
		wrap_sink = p;                                    \
		return p;                                         \
	}
STEP(step1, xmalloc)
STEP(step2, step1)
STEP(step3, step2)
STEP(step4, step3)
STEP(step5, step4)
STEP(step6, step5)
STEP(step7, step6)
STEP(step8, step7)
STEP(step9, step8)
STEP(step10, step9)

__attribute__((noipa)) void *deep_alloc(unsigned long n)
{
	void *p = step10(n);

	wrap_sink = p;
	return p;
}
