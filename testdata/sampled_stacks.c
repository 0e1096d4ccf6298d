/*
 * sampled_stacks.c: one call site of malloc (make_block's) reached by two
 * chains, main -> left -> make_block and main -> right -> middle ->
 * make_block, for sampled mode's stacks. left keeps 30 blocks of 8192
 * bytes; right allocates 20 of 16384 and frees 5. Blocks this large are
 * always sampled at --sample-bytes 64, each weighing exactly 1, so the
 * estimates are the true figures.
 */
#include <stdlib.h>

void *volatile keep[64];

__attribute__((noipa)) void *make_block(size_t n)
{
	void *p = malloc(n); /* @site make_block */

	if (!p) /* also keeps the call from being a tail call */
		abort();
	return p;
}

__attribute__((noipa)) void left(void)
{
	for (int i = 0; i < 30; i++)
		keep[i] = make_block(8192);
}

__attribute__((noipa)) void middle(int i)
{
	keep[30 + i] = make_block(16384);
}

__attribute__((noipa)) void right(void)
{
	for (int i = 0; i < 20; i++)
		middle(i);
	for (int i = 0; i < 5; i++)
		free(keep[30 + i]);
}

int main(void)
{
	left();
	right();
	return 0;
}
