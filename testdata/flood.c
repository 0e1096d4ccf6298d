/* flood.c: floods memtrace's ring. Four threads malloc and free 64 bytes
 * as fast as they can, until killed; "ready" once they run. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

static void *churn(void *arg)
{
	for (;;) {
		sink = malloc(64);
		free(sink);
	}
	return arg;
}

int main(void)
{
	pthread_t t[3];

	for (int i = 0; i < 3; i++)
		if (pthread_create(&t[i], 0, churn, 0))
			return 1;
	write(1, "ready\n", 6);
	churn(0);
	return 0;
}
