/* mallocfree.c: the per-call microbenchmark of bench/ (membench).
 *
 * Usage: mallocfree PAIRS [THREADS [wait]]
 *
 * THREADS threads (default 1; the main thread is one of them) each run
 * PAIRS/THREADS iterations of  p = malloc(64); sink = p; free(p);
 * Only the loops are timed, with CLOCK_MONOTONIC, from the earliest start to
 * the latest end, so process start-up and probe attachment are excluded.
 * With "wait" it writes "ready" and waits for one byte on stdin before
 * starting, so that a tracer can attach to it by PID first.
 *
 * Two variants, chosen by the environment (for memtrace's unwinding and
 * wrapper rows): MALLOCFREE_DEPTH=N makes each pair at the bottom of N
 * nested calls (built -O2: no frame pointers), and MALLOCFREE_NEW=1 uses
 * operator new(64) and operator delete instead of malloc and free.
 *
 * Prints one line:  ns_per_pair=F pairs=N threads=T cpu_ns=C
 * ns_per_pair is wall time over all pairs (with T threads on fewer cores it
 * measures throughput, not latency); cpu_ns is the process's own user+system
 * time, which includes the kernel's time in uprobe traps.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256

void *volatile sink;
int volatile depth_sink;

/* libstdc++'s operator new(size_t) and sized operator delete, by their names. */
extern void *_Znwm(unsigned long);
extern void _ZdlPvm(void *, unsigned long);

static int use_new, depth;

__attribute__((noipa)) static void one_pair(void)
{
	void *p;

	if (use_new) {
		p = _Znwm(64);
		sink = p;
		_ZdlPvm(p, 64);
		return;
	}
	p = malloc(64);
	sink = p;
	free(p);
}

/* nest calls one_pair d calls deep (not tail calls: every frame stays). */
__attribute__((noipa)) static void nest(int d)
{
	if (d > 0)
		nest(d - 1);
	else
		one_pair();
	depth_sink = d;
}

static long per_thread;
static pthread_barrier_t start_line;

struct span {
	struct timespec start, end;
};

static long long ns(struct timespec t)
{
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* noipa: keep the loop a real function so the compiler cannot merge or drop
 * the malloc/free pairs. */
__attribute__((noipa)) static void *work(void *arg)
{
	struct span *s = arg;

	pthread_barrier_wait(&start_line);
	clock_gettime(CLOCK_MONOTONIC, &s->start);
	if (use_new || depth) {
		for (long i = 0; i < per_thread; i++)
			nest(depth);
		clock_gettime(CLOCK_MONOTONIC, &s->end);
		return NULL;
	}
	for (long i = 0; i < per_thread; i++) {
		void *p = malloc(64);
		sink = p;
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &s->end);
	return NULL;
}

int main(int argc, char **argv)
{
	long pairs;
	int threads = 1;
	struct span spans[MAX_THREADS];
	pthread_t tids[MAX_THREADS];

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: mallocfree PAIRS [THREADS [wait]]\n");
		return 2;
	}
	pairs = atol(argv[1]);
	if (argc >= 3)
		threads = atoi(argv[2]);
	if (pairs <= 0 || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "mallocfree: PAIRS must be > 0 and THREADS in 1..%d\n", MAX_THREADS);
		return 2;
	}
	per_thread = pairs / threads;
	if (getenv("MALLOCFREE_DEPTH"))
		depth = atoi(getenv("MALLOCFREE_DEPTH"));
	use_new = getenv("MALLOCFREE_NEW") != NULL;
	if (per_thread == 0)
		per_thread = 1;

	if (argc == 4) {
		char c;
		/* write(2), not stdio: nothing should allocate before the tracer is in. */
		if (write(1, "ready\n", 6) != 6)
			return 1;
		if (read(0, &c, 1) != 1)
			return 1; /* the harness gave up: do not run untraced */
	}

	if (pthread_barrier_init(&start_line, NULL, threads) != 0) {
		perror("mallocfree: pthread_barrier_init");
		return 1;
	}
	for (int i = 1; i < threads; i++) {
		if (pthread_create(&tids[i], NULL, work, &spans[i]) != 0) {
			perror("mallocfree: pthread_create");
			return 1;
		}
	}
	work(&spans[0]);
	for (int i = 1; i < threads; i++)
		pthread_join(tids[i], NULL);

	long long first = ns(spans[0].start), last = ns(spans[0].end);
	for (int i = 1; i < threads; i++) {
		if (ns(spans[i].start) < first)
			first = ns(spans[i].start);
		if (ns(spans[i].end) > last)
			last = ns(spans[i].end);
	}
	long done = per_thread * threads;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
	printf("ns_per_pair=%.3f pairs=%ld threads=%d cpu_ns=%lld\n",
	       (double)(last - first) / done, done, threads, cpu);
	return 0;
}
