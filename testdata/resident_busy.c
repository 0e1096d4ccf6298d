/*
 * resident_busy.c: a process already faulting when whole-host memtrace
 * starts. Until stdin closes it makes fresh pages resident through
 * memset, called from busy_fill: 1 MiB anonymous mappings (so every page
 * is new; malloc would soon reuse freed blocks), 64 kept, the oldest
 * unmapped. Each write fault is in
 * the C library's memset, to be charged to busy_fill from memtrace's first
 * sample on. It says "ready" once it runs.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCK (1 << 20)
#define KEEP 64

void *volatile sink;

__attribute__((noipa)) void busy_fill(char *p, size_t n)
{
	memset(p, 1, n);
	sink = p; /* after the call: no tail call, memset returns here */
}

int main(void)
{
	char *blocks[KEEP] = {0}, c;
	int i = 0;

	fcntl(0, F_SETFL, O_NONBLOCK);
	write(1, "ready\n", 6);
	for (;;) {
		if (blocks[i])
			munmap(blocks[i], BLOCK);
		blocks[i] = mmap(0, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (blocks[i] == MAP_FAILED)
			return 1;
		busy_fill(blocks[i], BLOCK);
		i = (i + 1) % KEEP;
		if (read(0, &c, 1) == 0)
			return 0; /* stdin closed */
	}
}
