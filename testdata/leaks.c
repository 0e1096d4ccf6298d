/*
 * leaks.c: one function per allocator behaviour, each with known bytes and
 * blocks, so that the tests can assert memtrace's numbers exactly. Results
 * go to a volatile sink so that gcc neither elides the calls nor turns them
 * into tail calls (which would charge them to main).
 *
 * Usage: leaks [CHURN]   (CHURN malloc/free pairs, default 1000000)
 * Build flags: -DNO_GLIBC_ONLY leaves out pvalloc and reallocarray, which
 * jemalloc does not define (glibc's would hand out glibc blocks).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void *volatile sink;
volatile size_t huge = SIZE_MAX / 2;
#define KEEP(p) (sink = (p))
#define FIXTURE __attribute__((noipa))

FIXTURE void leak_malloc(void)
{
	for (int i = 0; i < 3; i++)
		KEEP(malloc(100));
}

FIXTURE void leak_calloc(void)
{
	KEEP(calloc(10, 20));
	KEEP(calloc(20, 10));
}

/* 4 calls, 3 blocks released on the way, the last 600000 bytes live. Past
 * 128 KiB glibc serves blocks with mmap and grows them with mremap: those
 * nested calls must not count. */
FIXTURE void leak_realloc_chain(void)
{
	void *p = realloc(NULL, 10);
	p = realloc(p, 20);
	p = realloc(p, 300000);
	p = realloc(p, 600000);
	KEEP(p);
}

FIXTURE void leak_posix_memalign(void)
{
	void *p;
	for (int i = 0; i < 2; i++)
		if (posix_memalign(&p, 64, 256) == 0)
			KEEP(p);
}

FIXTURE void leak_aligned_alloc(void) { KEEP(aligned_alloc(128, 512)); }
FIXTURE void leak_memalign(void) { KEEP(memalign(64, 1024)); }
FIXTURE void leak_valloc(void) { KEEP(valloc(100)); }

#ifndef NO_GLIBC_ONLY
FIXTURE void leak_pvalloc(void) { KEEP(pvalloc(100)); }
FIXTURE void leak_reallocarray(void) { KEEP(reallocarray(NULL, 5, 40)); }
#endif

/* Failed allocations are not allocations, and not leaks. */
FIXTURE void fail_all(void)
{
	void *p = 0;
	KEEP(malloc(huge));
	KEEP(calloc(huge, 4));
	if (posix_memalign(&p, 64, huge) == 0)
		KEEP(p);
	KEEP(aligned_alloc(64, huge));
	KEEP(memalign(64, huge));
}

/* A failed realloc keeps the block live: 1 call, 50 bytes live. */
FIXTURE void realloc_fail(void)
{
	void *p = malloc(50);
	if (realloc(p, huge) == NULL)
		KEEP(p);
}

/* realloc(p, 0) releases p (glibc returns NULL): 1 call, 0 live. */
FIXTURE void realloc_zero(void)
{
	void *p = malloc(70);
	KEEP(realloc(p, 0));
}

FIXTURE void churn(long n)
{
	for (long i = 0; i < n; i++) {
		void *p = malloc(64);
		KEEP(p);
		free(p);
	}
	free(NULL);
}

/* Anonymous mappings: 3 pages leaked here... */
FIXTURE void map_leak(void)
{
	KEEP(mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
}

/* ...4 pages mapped with the middle one unmapped: 3 pages live in 2 regions... */
FIXTURE void map_partial(void)
{
	char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(p + 4096, 4096);
	KEEP(p);
}

/* ...and a file mapping, which is not memory the program allocated. */
FIXTURE void map_file(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	KEEP(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0));
	close(fd);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;

	leak_malloc();
	leak_calloc();
	leak_realloc_chain();
	leak_posix_memalign();
	leak_aligned_alloc();
	leak_memalign();
	leak_valloc();
#ifndef NO_GLIBC_ONLY
	leak_pvalloc();
	leak_reallocarray();
#endif
	fail_all();
	realloc_fail();
	realloc_zero();
	churn(n);
	map_leak();
	map_partial();
	map_file();
	return 0;
}
