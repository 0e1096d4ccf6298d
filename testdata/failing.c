/* failing.c: allocation calls that fail. 10 malloc calls of 64 TiB (they
 * fail unless the machine overcommits without limit; freed if not), 3
 * malloc calls larger than the address space and 3 calloc calls whose
 * size overflows (they always fail), and 5 malloc calls of 100 bytes,
 * freed. Prints "failed=N": how many of the 64 TiB calls failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

int main(void)
{
	volatile size_t big = (size_t)1 << 46, huge = SIZE_MAX / 2, half = SIZE_MAX / 2 + 2;
	int failed = 0;

	for (int i = 0; i < 10; i++) {
		sink = malloc(big);
		failed += sink == NULL;
		free(sink);
	}
	for (int i = 0; i < 3; i++)
		if ((sink = malloc(huge)) || (sink = calloc(half, 2)))
			return 1;
	for (int i = 0; i < 5; i++) {
		sink = malloc(100);
		free(sink);
	}
	/* write(2), not stdio: stdio would allocate a buffer of its own. */
	char line[32];
	write(1, line, snprintf(line, sizeof line, "failed=%d\n", failed));
	return 0;
}
