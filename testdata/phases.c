/*
 * Known phases and marks for the time tests (recordings, replay, the peak
 * snapshot, dumps, diff). With SCALE = argv[1] (default 1), in units of
 * 1 MiB * SCALE, blocks of 1 MiB * SCALE / 4:
 *   phase "churn":    take_and_free: 30 units allocated and freed
 *   phase "peak":     hold_a 20 units + hold_b 15 units live together
 *   phase "released": both freed
 *   phase "kept":     keep: 32 units allocated and never freed
 * Each phase ends with memtrace_mark("NAME"); phase_number(N) is a mark
 * whose first argument is no string. With "hold" as argv[2] it then
 * sleeps, so that a test can kill memtrace while it records.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The one-line recipe: a function memtrace --mark memtrace_mark can probe. */
__attribute__((noinline)) void memtrace_mark(const char *label) { __asm__ volatile("" : : "r"(label) : "memory"); }

__attribute__((noinline)) void phase_number(long n) { __asm__ volatile("" : : "r"(n) : "memory"); }

#define UNIT (1L << 20)
#define PER_UNIT 4

/* GCC drops a malloc whose block is only freed: the sink keeps it. */
void *volatile sink;

static void *blocks_a[20 * PER_UNIT * 8], *blocks_b[15 * PER_UNIT * 8];

__attribute__((noinline)) static void take_and_free(long scale)
{
	for (long i = 0; i < 30 * PER_UNIT; i++) {
		void *p = malloc(UNIT * scale / PER_UNIT);
		memset(p, 1, 64);
		sink = p;
		free(sink);
	}
}

__attribute__((noinline)) static void hold_a(long scale)
{
	for (long i = 0; i < 20 * PER_UNIT; i++) {
		blocks_a[i] = malloc(UNIT * scale / PER_UNIT);
		memset(blocks_a[i], 2, 64);
	}
}

__attribute__((noinline)) static void hold_b(long scale)
{
	for (long i = 0; i < 15 * PER_UNIT; i++) {
		blocks_b[i] = malloc(UNIT * scale / PER_UNIT);
		memset(blocks_b[i], 3, 64);
	}
}

__attribute__((noinline)) static void release(void)
{
	for (long i = 0; i < 20 * PER_UNIT; i++)
		free(blocks_a[i]);
	for (long i = 0; i < 15 * PER_UNIT; i++)
		free(blocks_b[i]);
}

void *kept[32 * PER_UNIT];

__attribute__((noinline)) static void keep(long scale)
{
	for (long i = 0; i < 32 * PER_UNIT; i++) {
		kept[i] = malloc(UNIT * scale / PER_UNIT);
		memset(kept[i], 4, 64);
	}
}

int main(int argc, char **argv)
{
	long scale = argc > 1 ? atol(argv[1]) : 1;

	if (scale < 1 || scale > 8)
		return 2;
	take_and_free(scale);
	memtrace_mark("churn");
	hold_a(scale);
	hold_b(scale);
	memtrace_mark("peak");
	release();
	memtrace_mark("released");
	phase_number(3);
	keep(scale);
	memtrace_mark("kept");
	if (argc > 2 && strcmp(argv[2], "hold") == 0)
		sleep(60);
	return 0;
}
