/*
 * exports_phases.c: three phases with known figures, for the exports (--pprof,
 * --folded, --html, --listen). grow() keeps 100 blocks of 10000 bytes;
 * spike() adds 40 blocks of 50000 bytes, holds them 600 ms (the peak) and
 * frees them; settle() keeps 10 blocks of 4096 bytes. With "wait" it then
 * prints "ready" and waits for stdin to close before it exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *volatile keep[200];

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

__attribute__((noipa)) void grow(void)
{
	for (int i = 0; i < 100; i++)
		keep[i] = malloc(10000); /* @site grow */
}

__attribute__((noipa)) void spike(void)
{
	for (int i = 0; i < 40; i++)
		keep[100 + i] = malloc(50000); /* @site spike */
	pause_ms(600);
	for (int i = 0; i < 40; i++)
		free(keep[100 + i]);
}

__attribute__((noipa)) void settle(void)
{
	for (int i = 0; i < 10; i++)
		keep[150 + i] = malloc(4096); /* @site settle */
}

int main(int argc, char **argv)
{
	pause_ms(300);
	grow();
	pause_ms(300);
	spike();
	pause_ms(300);
	settle();
	pause_ms(300);
	if (argc > 1 && strcmp(argv[1], "wait") == 0) {
		char buf[64];
		printf("ready\n");
		fflush(stdout);
		while (fread(buf, 1, sizeof buf, stdin) > 0)
			;
	}
	return 0;
}
