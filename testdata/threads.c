/* threads.c: THREADS threads x PAIRS malloc/free pairs each, all from one
 * call site, plus one 4096-byte block per thread left live. */
#include <pthread.h>
#include <stdlib.h>

#define THREADS 8
#define PAIRS 200000

void *volatile sink;

__attribute__((noipa)) static void *work(void *arg)
{
	(void)arg;
	for (int i = 0; i < PAIRS; i++) {
		void *p = malloc(32);
		sink = p;
		free(p);
	}
	sink = malloc(4096);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, work, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
