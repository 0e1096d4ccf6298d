/*
 * A page-fault-heavy program (the resident benchmark): map 256 MiB
 * anonymous, write one byte per page, unmap; ROUNDS times (argv[1],
 * default 8). Every write is a fault that makes a page resident.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SIZE (256UL << 20)

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 8;
	unsigned long sum = 0;

	for (int r = 0; r < rounds; r++) {
		volatile char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		for (unsigned long i = 0; i < SIZE; i += 4096)
			p[i] = (char)i;
		sum += p[4096];
		munmap((void *)p, SIZE);
	}
	printf("faults: %d rounds of %lu pages (%lu)\n", rounds, SIZE / 4096, sum);
	return 0;
}
