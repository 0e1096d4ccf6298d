/* running.c: a process memtrace attaches to while it runs. It allocates
 * 10 blocks of 256 bytes, says "ready", waits for a line on stdin, frees
 * those 10 (memtrace never saw them allocated: unmatched frees), leaks
 * 5 blocks of 1000 bytes in leak_after(), says "done", waits for another
 * line and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noipa)) void leak_after(void)
{
	for (int i = 0; i < 5; i++)
		sink = malloc(1000);
}

int main(void)
{
	void *before[10];
	char line[64];
	for (int i = 0; i < 10; i++)
		before[i] = malloc(256);
	/* write(2), not stdio: stdio would allocate a buffer of its own. */
	write(1, "ready\n", 6);
	if (read(0, line, sizeof line) <= 0)
		return 1;
	for (int i = 0; i < 10; i++)
		free(before[i]);
	leak_after();
	write(1, "done\n", 5);
	if (read(0, line, sizeof line) <= 0)
		return 0;
	return 0;
}
