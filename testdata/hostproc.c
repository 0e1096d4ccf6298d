/*
 * hostproc.c: the whole-host mode's fixture. It waits WAIT_MS
 * milliseconds (long enough for memtrace to probe an allocator file it
 * has not seen, such as a chroot's own libc; with -1, until a byte
 * arrives on stdin), then makes exactly 2*N
 * allocation calls: host_leak leaks N blocks of 1000 bytes, host_churn
 * allocates and frees N blocks of 500 bytes. It prints nothing (stdio
 * would allocate); with -1 it writes one byte to stdout once its calls are
 * made (write(2): no allocation), for a test to wait for. It waits HOLD_MS
 * more (still running when memtrace ends) and exits.
 *
 * Usage: hostproc WAIT_MS N [HOLD_MS]
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;
#define FIXTURE __attribute__((noipa))

FIXTURE void host_leak(int n)
{
	for (int i = 0; i < n; i++)
		sink = malloc(1000);
}

FIXTURE void host_churn(int n)
{
	for (int i = 0; i < n; i++) {
		sink = malloc(500);
		free(sink);
	}
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 0;
	int n = argc > 2 ? atoi(argv[2]) : 5;
	long hold = argc > 3 ? atol(argv[3]) : 0;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	struct timespec held = {hold / 1000, (hold % 1000) * 1000000L};

	if (ms > 0)
		nanosleep(&ts, 0);
	if (ms < 0) {
		char c;
		if (read(0, &c, 1) != 1)
			return 1; /* the test gave up */
	}
	host_leak(n);
	host_churn(n);
	if (ms < 0 && write(1, "1", 1) != 1) {
		/* no reader: nothing waits for it */
	}
	if (hold > 0)
		nanosleep(&held, 0);
	return 0;
}
