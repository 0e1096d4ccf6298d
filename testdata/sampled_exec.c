/* sampled_exec.c: makes 100 blocks it never frees, then execs itself with
 * "done", which returns at once: the new program starts with none of
 * them, so a tracer forgets them at the exec. */
#include <stdlib.h>
#include <unistd.h>

void *volatile sink[100];

int main(int argc, char **argv)
{
	if (argc > 1)
		return 0;
	for (int i = 0; i < 100; i++)
		sink[i] = malloc(100 + i);
	execl("/proc/self/exe", argv[0], "done", (char *)0);
	return 1;
}
