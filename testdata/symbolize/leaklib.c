/*
 * Shared library for the symbolize tests: lib_leak is exported, so it
 * still resolves through .dynsym after strip --strip-all.
 */
#include <stdio.h>
#include <stdlib.h>

/* Hidden and static: after strip nothing names it, which is the point. */
static __attribute__((noinline, noclone)) void *lib_record(size_t n) {
	printf("LIB_LEAK %p\n", __builtin_return_address(0));
	return malloc(n);
}

void *lib_leak(void) {
	void *p = lib_record(64); /* LIB_LEAK */
	__asm__ volatile("" ::: "memory");
	return p;
}
