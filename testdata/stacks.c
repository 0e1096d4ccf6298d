/*
 * stacks.c: main -> outer -> inner -> malloc, for --detail. Built with
 * -fno-omit-frame-pointer the whole stack unwinds; built without, memtrace
 * must mark the stack truncated rather than guess.
 */
#include <stdlib.h>

void *volatile sink;

__attribute__((noipa)) void inner(void)
{
	sink = malloc(24); /* @site inner */
}

__attribute__((noipa)) void outer(void)
{
	inner(); /* @site outer */
	sink = 0;
}

volatile int rounds = 3; /* opaque, so gcc does not unroll the loop */

int main(void)
{
	for (int i = 0; i < rounds; i++)
		outer(); /* @site main */
	return 0;
}
