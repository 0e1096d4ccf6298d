// The footprint fixtures: each builds a known heap or mapping state, then
// reads its own /proc (status and smaps, with no allocation: the reading
// must not change what it reads) and prints the figures to stderr as
// "key value" lines, then exits at once. memtrace reads the same process
// at its exit stop, so both readings see one state.
//
//   frag     400000 blocks of 200 bytes, 15 of every 16 freed, malloc_trim(0)
//   reserve  64 MiB of PROT_NONE committed piecewise (mprotect, MAP_FIXED),
//            partly touched, partly given back with madvise(MADV_DONTNEED)
//   large    ten 1 MiB blocks (glibc mmaps each), four freed
//   arenas   four threads keep 2000 blocks of 1000 bytes each: glibc gives
//            them arenas of their own
//
// With a second argument "hold", it waits for a line on stdin before the
// work and for the end of stdin after its reading (whole-host tests read
// it while it waits).
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char buf[4 << 20];

// slurp reads a /proc file into buf, NUL-terminated.
static void slurp(const char *path)
{
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;

	if (fd < 0) {
		perror(path);
		_exit(2);
	}
	while ((r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += r;
	buf[n] = 0;
	close(fd);
}

// status prints RssAnon, RssFile and RssShmem in bytes.
static void status(void)
{
	slurp("/proc/self/status");
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long kb;
		if (sscanf(l, "RssAnon: %lu", &kb) == 1)
			fprintf(stderr, "rss_anon %lu\n", kb << 10);
		if (sscanf(l, "RssFile: %lu", &kb) == 1)
			fprintf(stderr, "rss_file %lu\n", kb << 10);
		if (sscanf(l, "RssShmem: %lu", &kb) == 1)
			fprintf(stderr, "rss_shmem %lu\n", kb << 10);
	}
}

// resident sums smaps' Rss (bytes) of the mappings that lie in [lo, hi),
// of [heap] when heap is set, and of those holding one of the n addresses
// in at.
static unsigned long resident(unsigned long lo, unsigned long hi, int heap, void **at, int n)
{
	unsigned long start = 0, end = 0, kb, sum = 0;
	int in = 0;

	slurp("/proc/self/smaps");
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (sscanf(l, "%lx-%lx ", &start, &end) == 2 && strchr(l, '-') < strchr(l, ' ')) {
			in = start >= lo && end <= hi && hi > lo;
			if (heap && strstr(l, "[heap]") && strstr(l, "[heap]") < strchr(l, '\n'))
				in = 1;
			for (int i = 0; i < n; i++)
				if (at[i] && (unsigned long)at[i] >= start && (unsigned long)at[i] < end)
					in = 1;
		} else if (in && sscanf(l, "Rss: %lu", &kb) == 1) {
			sum += kb << 10;
		}
	}
	return sum;
}

static void frag(void)
{
	enum { N = 400000, SIZE = 200 };
	static void *p[N];
	unsigned long live = 0, pages = 0, last = 0;

	for (int i = 0; i < N; i++)
		p[i] = malloc(SIZE);
	for (int i = 0; i < N; i++)
		if (i % 16) {
			free(p[i]);
			p[i] = NULL;
		}
	malloc_trim(0);
	// The pages glibc must keep: every page a live block (header included) touches.
	for (int i = 0; i < N; i++) {
		if (!p[i])
			continue;
		live += SIZE;
		for (unsigned long pg = ((unsigned long)p[i] - 16) >> 12; pg <= ((unsigned long)p[i] + SIZE - 1) >> 12; pg++)
			if (pg > last || !last) {
				pages++;
				last = pg;
			}
	}
	fprintf(stderr, "live %lu\nmust_keep %lu\n", live, pages << 12);
	fprintf(stderr, "heap_resident %lu\n", resident(0, 0, 1, NULL, 0));
}

static void reserve(void)
{
	const size_t mb = 1 << 20;
	char *r = mmap(NULL, 64 * mb, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (r == MAP_FAILED) {
		perror("mmap");
		_exit(2);
	}
	// Commit 8 MiB with mprotect and touch it all.
	mprotect(r, 8 * mb, PROT_READ | PROT_WRITE);
	memset(r, 1, 8 * mb);
	// Commit 4 MiB more as the JVM does, with MAP_FIXED over the
	// reservation, and touch half of it.
	mmap(r + 8 * mb, 4 * mb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	memset(r + 8 * mb, 1, 2 * mb);
	// Give 2 MiB of the first part back: still committed, no longer resident.
	madvise(r + 2 * mb, 2 * mb, MADV_DONTNEED);
	fprintf(stderr, "reserved %lu\ncommitted %lu\n", 64 * mb, 12 * mb);
	fprintf(stderr, "resident %lu\n", resident((unsigned long)r, (unsigned long)r + 64 * mb, 0, NULL, 0));
}

static void large(void)
{
	enum { N = 10, SIZE = 1 << 20 };
	void *p[N];
	unsigned long live = 0;

	for (int i = 0; i < N; i++) {
		p[i] = malloc(SIZE);
		memset(p[i], 1, SIZE);
	}
	for (int i = 0; i < N; i += 3) {
		free(p[i]);
		p[i] = NULL;
	}
	for (int i = 0; i < N; i++)
		if (p[i])
			live += SIZE;
	fprintf(stderr, "live %lu\n", live);
	fprintf(stderr, "heap_resident %lu\n", resident(0, 0, 1, p, N));
}

// wait_stdin reads stdin until a newline (line) or its end.
static void wait_stdin(int line)
{
	char c;

	while (read(0, &c, 1) == 1)
		if (line && c == '\n')
			return;
}

enum { THREADS = 4, PER_THREAD = 2000, BLOCK = 1000 };
static void *kept[THREADS * PER_THREAD];

static void *keep_blocks(void *arg)
{
	void **p = arg;

	for (int i = 0; i < PER_THREAD; i++)
		p[i] = malloc(BLOCK);
	return NULL;
}

static void arenas(void)
{
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, keep_blocks, &kept[i * PER_THREAD]);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	fprintf(stderr, "live %lu\n", (unsigned long)THREADS * PER_THREAD * BLOCK);
	fprintf(stderr, "heap_resident %lu\n", resident(0, 0, 1, kept, THREADS * PER_THREAD));
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int hold = argc > 2 && !strcmp(argv[2], "hold");

	// stderr is unbuffered; stdout's buffer is made here, before the reading.
	printf("footprint %s\n", mode);
	fflush(stdout);
	if (hold)
		wait_stdin(1);
	if (!strcmp(mode, "frag"))
		frag();
	else if (!strcmp(mode, "reserve"))
		reserve();
	else if (!strcmp(mode, "large"))
		large();
	else if (!strcmp(mode, "arenas"))
		arenas();
	else {
		fprintf(stderr, "usage: footprint frag|reserve|large|arenas [hold]\n");
		return 2;
	}
	status();
	if (hold) {
		fprintf(stderr, "ready\n");
		wait_stdin(0);
	}
	_exit(0);
}
