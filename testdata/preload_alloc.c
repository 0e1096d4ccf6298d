/*
 * preload_alloc.c: an LD_PRELOAD allocator that forwards to glibc. Built with
 * -fcf-protection=full, every function begins with endbr64, which the kernel
 * must single-step: memtrace places its probes after it. memtrace must also
 * find that malloc binds here, not in libc.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

void *malloc(size_t n) { return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }

void *reallocarray(void *p, size_t n, size_t m)
{
	if (m && n > SIZE_MAX / m) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, n * m);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
