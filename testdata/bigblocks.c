/* bigblocks.c: blocks glibc's malloc and calloc take from mmap (above
 * its 128 KiB threshold). Says "ready", waits for a line, makes 500 with
 * malloc and 500 with calloc and keeps them, says "done", waits for
 * another line and exits. Every mmap is nested in an allocation call. */
#include <stdlib.h>
#include <unistd.h>

void *volatile keep[1000];

int main(void)
{
	char line[64];

	write(1, "ready\n", 6);
	if (read(0, line, sizeof line) <= 0)
		return 1;
	for (int i = 0; i < 500; i++)
		keep[i] = malloc(200000 + i);
	for (int i = 0; i < 500; i++)
		keep[500 + i] = calloc(1, 150000 + i);
	write(1, "done\n", 5);
	if (read(0, line, sizeof line) <= 0)
		return 0;
	return 0;
}
