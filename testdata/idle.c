/*
 * An idle process for the whole-host list: it makes argv[1] MiB resident
 * (malloc'ed, written), says "ready", then sleeps in read(2) until its
 * input ends, taking no page fault meanwhile, and exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *volatile keep; /* read by nobody: the compiler must keep the block */

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 100;
	keep = malloc(mib << 20);
	if (!keep)
		return 1;
	memset(keep, 1, mib << 20);
	printf("ready\n");
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0)
		;
	return 0;
}
