/* chainlib.c: the shared library chains.c calls through its PLT. */
#include <stdlib.h>

void *volatile lib_sink;

__attribute__((noipa)) void *lib_alloc(unsigned long n)
{
	void *p = malloc(n); /* @site lib_alloc */

	lib_sink = p; /* not a tail call: lib_alloc stays on the stack */
	return p;
}
