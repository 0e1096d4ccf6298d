/*
 * Resident attribution fixture: each function makes its own memory
 * resident by writing it, and keeps it to the end. Sizes in MiB from argv
 * (default 64 32 16): malloc'ed and written by memset (charged past memset
 * and malloc), its own mmap written a byte a page, calloc'ed and written a
 * byte a page. With HOLD_MS set it sleeps that long before exiting. With
 * WAIT set it reads a line before it allocates, and after "ready" another
 * line, then releases everything (free, munmap), says "freed" and waits
 * for its input to end; if that line is "pageout", it asks the kernel to
 * reclaim its memory instead (MADV_PAGEOUT: with swap on, the pages go to
 * swap), says "paged out" and waits likewise. With EXEC set it then
 * executes that program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MiB (1UL << 20)
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

char *volatile keep[3]; /* read by nobody, but kept: the compiler must not drop the blocks */

__attribute__((noinline)) void hold_malloc(size_t n)
{
	char *p = malloc(n);

	memset(p, 1, n);
	keep[0] = p;
}

__attribute__((noinline)) void hold_mmap(size_t n)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	keep[1] = p;
}

__attribute__((noinline)) void hold_calloc(size_t n)
{
	char *p = calloc(1, n);

	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	keep[2] = p;
}

int main(int argc, char **argv)
{
	size_t a = argc > 1 ? atol(argv[1]) : 64, b = argc > 2 ? atol(argv[2]) : 32,
	       c = argc > 3 ? atol(argv[3]) : 16;
	const char *hold = getenv("HOLD_MS"), *wait = getenv("WAIT");
	char line[64];
	/*
	 * No transparent huge pages (Debian's kernels default to "always"):
	 * these figures measure the sampling of 4 KiB faults (a 2 MiB fault is
	 * always sampled; resident_thp.c has huge pages).
	 */
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);

	if (wait && !fgets(line, sizeof(line), stdin))
		return 1;

	hold_malloc(a * MiB);
	hold_mmap(b * MiB);
	hold_calloc(c * MiB);
	printf("ready\n");
	fflush(stdout);
	if (wait) {
		if (!fgets(line, sizeof(line), stdin))
			return 1;
		if (strcmp(line, "pageout\n") == 0) {
			size_t n[3] = {a * MiB, b * MiB, c * MiB};

			/* madvise wants page-aligned ranges: malloc's blocks start 16 bytes in. */
			for (int i = 0; i < 3; i++) {
				size_t start = ((size_t)keep[i] + 4095) & ~4095UL, end = ((size_t)keep[i] + n[i]) & ~4095UL;

				if (madvise((void *)start, end - start, MADV_PAGEOUT))
					perror("madvise");
			}
			printf("paged out\n");
		} else {
			free(keep[0]);
			munmap(keep[1], b * MiB);
			free(keep[2]);
			printf("freed\n");
		}
		fflush(stdout);
		while (fgets(line, sizeof(line), stdin))
			;
	}
	if (getenv("EXEC")) {
		execl(getenv("EXEC"), getenv("EXEC"), (char *)NULL);
		perror("exec");
		return 1;
	}
	if (hold) {
		long ms = atol(hold);
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

		nanosleep(&ts, NULL);
	}
	return 0;
}
