/*
 * Access statistics fixture (--access): four call sites whose blocks are
 * used in known ways, each a whole number of pages, page-aligned.
 *  - hot_block: 8 pages, each rewritten continuously;
 *  - read_block: 4 pages, written once at the start, then read continuously;
 *  - once_block: 6 pages, written once at the start, then left;
 *  - never_block: 20 pages (80 KiB, a large block), never touched.
 * It runs for argv[1] milliseconds (default 2500), calls loop_done (a
 * function to --mark: the epochs before it saw the loop only), then prints
 * a checksum of read_block (which only reads it again), which tracing
 * must not change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 4096

__attribute__((noinline)) void *hot_block(void)
{
	void *p = 0;
	return posix_memalign(&p, PAGE, 8 * PAGE) ? 0 : p;
}

__attribute__((noinline)) void *read_block(void)
{
	void *p = 0;
	return posix_memalign(&p, PAGE, 4 * PAGE) ? 0 : p;
}

__attribute__((noinline)) void *once_block(void)
{
	void *p = 0;
	return posix_memalign(&p, PAGE, 6 * PAGE) ? 0 : p;
}

__attribute__((noinline)) void *never_block(void)
{
	void *p = 0;
	return posix_memalign(&p, PAGE, 20 * PAGE) ? 0 : p;
}

__attribute__((noinline)) void loop_done(const char *what)
{
	__asm__ volatile("" : : "r"(what) : "memory");
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	long run = argc > 1 ? atol(argv[1]) : 2500;
	volatile unsigned char *hot = hot_block();
	volatile unsigned char *rd = read_block();
	unsigned char *once = once_block();
	void *volatile never = never_block();
	if (!hot || !rd || !once || !never)
		return 1;
	for (int i = 0; i < 4 * PAGE; i++)
		rd[i] = (unsigned char)i;
	memset(once, 7, 6 * PAGE);
	long long end = now_ms() + run;
	for (unsigned n = 0; now_ms() < end; n++) {
		for (int p = 0; p < 8; p++)
			hot[p * PAGE + n % PAGE] = (unsigned char)n;
		for (int p = 0; p < 4; p++)
			(void)rd[p * PAGE + n % PAGE];
	}
	loop_done("loop done");
	unsigned long sum = 0;
	for (int i = 0; i < 4 * PAGE; i++)
		sum += rd[i];
	printf("checksum %lu\n", sum);
	return 0;
}
