/*
 * Resident attribution with transparent huge pages: hold_huge makes its
 * own 2 MiB-aligned mapping resident with MADV_HUGEPAGE (a fault per 2 MiB
 * maps a huge page), hold_small a mapping with MADV_NOHUGEPAGE (a fault
 * per 4 KiB); both written a byte a page. Sizes in MiB from argv (default
 * 64 16). It prints "thp N", the kB of huge pages the process holds
 * (AnonHugePages of /proc/self/smaps_rollup: the proof that the kernel
 * mapped them), then "ready". With RELEASE set, hold_huge's huge pages
 * are then released in part, 64 KiB of each (MADV_DONTNEED splits them):
 * the first 64 KiB of every other one, 64 KiB from the middle of the
 * rest, so that 62 of its 64 MiB stay resident; it prints "released".
 * RELEASE_KB sets the amount released of each (default 64). With REWRITE
 * set too, once a byte arrives on stdin (the test sends it when memtrace's
 * check has seen the release; end of file: at once), rewrite_released
 * writes the released pages again: made resident anew, by another
 * function, half of them on the first pages of the huge pages. With HOLD_MS set it sleeps that long before exiting.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MiB (1UL << 20)
#define HUGE (2 * MiB)

char *volatile keep[2]; /* read by nobody, but kept: the compiler must not drop the blocks */

static char *map(size_t n, int advice)
{
	/* 2 MiB more, to start on a 2 MiB boundary: only whole huge pages. */
	char *p = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	p = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	if (madvise(p, n, advice)) {
		perror("madvise");
		exit(1);
	}
	return p;
}

__attribute__((noinline)) void hold_huge(size_t n)
{
	char *p = map(n, MADV_HUGEPAGE);

	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	keep[0] = p;
}

__attribute__((noinline)) void hold_small(size_t n)
{
	char *p = map(n, MADV_NOHUGEPAGE);

	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	keep[1] = p;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static size_t released = 64 * 1024; /* of each huge page (RELEASE_KB) */

/* The part of each huge page that main released, as it chose them. */
__attribute__((noinline)) void rewrite_released(size_t n)
{
	for (size_t off = 0; off < n; off += HUGE) {
		char *p = keep[0] + off + (off / HUGE % 2 ? 0 : MiB);

		for (size_t i = 0; i < released; i += 4096)
			p[i] = 2;
	}
}

static long anon_huge_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	size_t a = argc > 1 ? atol(argv[1]) : 64, b = argc > 2 ? atol(argv[2]) : 16;
	const char *hold = getenv("HOLD_MS");

	hold_huge(a * MiB);
	hold_small(b * MiB);
	printf("thp %ld\nready\n", anon_huge_kb());
	fflush(stdout);
	if (getenv("RELEASE")) {
		if (getenv("RELEASE_KB"))
			released = atol(getenv("RELEASE_KB")) * 1024; /* at most 1024 */
		for (size_t off = 0; off < a * MiB; off += HUGE) {
			size_t at = off / HUGE % 2 ? 0 : MiB;

			if (madvise(keep[0] + off + at, released, MADV_DONTNEED)) {
				perror("madvise");
				return 1;
			}
		}
		printf("released\n");
		fflush(stdout);
		if (getenv("REWRITE")) {
			/*
			 * Or khugepaged may collapse the released ranges back into
			 * huge pages while it sleeps (zeroed: no fault to rewrite).
			 */
			if (madvise(keep[0], a * MiB, MADV_NOHUGEPAGE)) {
				perror("madvise");
				return 1;
			}
			char go;
			if (read(0, &go, 1) < 0)
				go = 0;
			rewrite_released(a * MiB);
			printf("rewritten\n");
			fflush(stdout);
		}
	}
	if (hold)
		sleep_ms(atol(hold));
	return 0;
}
