/*
 * inlined.c: call sites for symbolization (cmd/memtrace/e2e_symbolize_test.go).
 *
 * make_buffer is inlined into wrap_buffer, which is inlined into
 * leak_inlined: the malloc call is charged to leak_inlined, at the line of
 * the call in make_buffer, with the inline chain make_buffer (that line),
 * wrap_buffer (the line calling make_buffer), leak_inlined (the line
 * calling wrap_buffer). leak_static is a local symbol, which .dynsym never
 * has: stripped, only MiniDebugInfo or a debug file names it. leak_direct
 * calls malloc through a function pointer (an indirect call).
 */
#include <stdlib.h>

void *volatile sink;

static inline __attribute__((always_inline)) void *make_buffer(size_t n)
{
	return malloc(n); /* @site make_buffer */
}

static inline __attribute__((always_inline)) void *wrap_buffer(size_t n)
{
	void *p = make_buffer(n + 8); /* @site wrap_buffer */
	return p;
}

__attribute__((noipa)) void leak_inlined(void)
{
	sink = wrap_buffer(24); /* @site leak_inlined */
}

static __attribute__((noipa)) void leak_static(void)
{
	for (int i = 0; i < 2; i++)
		sink = malloc(40); /* @site leak_static */
}

void *(*volatile allocate)(size_t) = malloc;

__attribute__((noipa)) void leak_direct(void)
{
	sink = allocate(56); /* @site leak_direct */
}

int main(void)
{
	leak_inlined(); /* 32 bytes */
	leak_static();  /* 2 x 40 bytes */
	leak_direct();  /* 56 bytes */
	return 0;
}
