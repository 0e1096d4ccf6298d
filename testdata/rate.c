/* rate.c: allocates a steady 10 MiB/s, never freed, for argv[1] seconds
 * (default 6): 104858 bytes every 10 ms from steady_alloc(), paced on
 * absolute CLOCK_MONOTONIC deadlines so the rate does not drift. With
 * "churn" as argv[2] it also allocates and frees 256 KiB 100 times a second
 * in churn() (25 MiB/s, net 0), so a view has something in every column and
 * the order of call sites depends on the sort. With "stop" as well, the
 * steady allocation stops half-way through (churn goes on): the averages
 * then fall, each at the pace of its half-life.
 * It asks for a real-time priority (when root) so that a busy machine does
 * not starve it; if it still falls more than 50 ms behind its schedule the
 * rate was not steady: it says so on stderr and exits with status 2. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *volatile sink;

#define STEP_NS 10000000L /* 10 ms */
#define STEP_BYTES 104858 /* 10 MiB/s = 10485760 B/s, to 0.0004 % */

__attribute__((noipa)) void steady_alloc(void)
{
	sink = malloc(STEP_BYTES);
}

__attribute__((noipa)) void churn(void)
{
	void *p = malloc(256 << 10);
	sink = p;
	free(p);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 6;
	int with_churn = 0, stop = 0;
	for (int a = 2; a < argc; a++) {
		with_churn |= strcmp(argv[a], "churn") == 0;
		stop |= strcmp(argv[a], "stop") == 0;
	}
	long steps = (long)(secs * 1e9 / STEP_NS);
	struct sched_param sp = {.sched_priority = 10};
	sched_setscheduler(0, SCHED_FIFO, &sp); /* best effort */
	struct timespec next, now;
	long max_lag = 0;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long i = 0; i < steps; i++) {
		if (!stop || i < steps / 2)
			steady_alloc();
		if (with_churn)
			churn();
		next.tv_nsec += STEP_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		long lag = (now.tv_sec - next.tv_sec) * 1000000000L + (now.tv_nsec - next.tv_nsec);
		if (lag > max_lag)
			max_lag = lag;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	if (max_lag > 50000000L) {
		/* stdio allocates, but the measured part is over. */
		fprintf(stderr, "rate: fell %ld ms behind schedule: not steady\n", max_lag / 1000000);
		return 2;
	}
	return 0;
}
