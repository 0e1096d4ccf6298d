/*
 * A block whose only pointer is on a worker thread's stack, the worker
 * blocked when main exits. At the exit stop only the exiting thread's
 * stack pointer is known, so the worker's whole stack mapping (8 MiB) is
 * a root, almost all of it never touched: memtrace reads only its pages
 * that were (leakcheck.Touched), and the block is still reached.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sem_t ready;

__attribute__((noinline)) static void *on_stack(void)
{
	return malloc(4096);
}

static void *worker(void *arg)
{
	void *volatile kept = on_stack(); /* only here: on this stack */

	(void)arg;
	memset(kept, 1, 4096);
	sem_post(&ready);
	for (;;)
		pause();
	return kept;
}

__attribute__((noinline)) static void dropped(void)
{
	void *volatile p = malloc(100);

	memset(p, 2, 100);
	p = 0;
}

int main(void)
{
	pthread_t t;

	sem_init(&ready, 0, 0);
	if (pthread_create(&t, 0, worker, 0))
		return 1;
	sem_wait(&ready);
	dropped();
	exit(0);
}
