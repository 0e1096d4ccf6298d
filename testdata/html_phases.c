/*
 * html_phases.c: the HTML report's timeline across idle stretches. It
 * keeps 25 MiB (written: resident) at once, idles HOLD_MS (default 1500),
 * frees the first half, idles HOLD_MS again and exits. While it idles it
 * makes no event: the timeline has no point there but memtrace's own.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1UL << 20)

char *volatile keep[25];

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

__attribute__((noipa)) void hold(void)
{
	for (int i = 0; i < 25; i++) {
		keep[i] = malloc(MiB);
		memset(keep[i], 1, MiB);
	}
}

__attribute__((noipa)) void release(void)
{
	for (int i = 0; i < 12; i++)
		free(keep[i]);
}

int main(void)
{
	const char *h = getenv("HOLD_MS");
	long ms = h ? atol(h) : 1500;

	hold();
	pause_ms(ms);
	release();
	pause_ms(ms);
	return 0;
}
