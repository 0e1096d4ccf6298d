/*
 * hold.c: a program that holds many small blocks live at exit (make
 * bench's "heapscale" section: memtrace's own memory per live block, and
 * the leak check's speed). Makes N blocks of 48 bytes (default 5,000,000),
 * links each to the next so that the leak check follows a chain, keeps
 * the list's head in a global and drops every LEAK-th block from it
 * (default 1000: those are definitely lost), then exits. Prints one line:
 *
 *   blocks=N lost=L
 *
 * Usage: hold [N [LEAK]]
 */
#include <stdio.h>
#include <stdlib.h>

struct node {
	struct node *next;
	char pad[40];
};

struct node *head;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 5000000;
	long leak = argc > 2 ? atol(argv[2]) : 1000;
	struct node **tail = &head;
	long lost = 0;

	if (n < 1 || leak < 0) {
		fprintf(stderr, "hold: N must be > 0 and LEAK >= 0\n");
		return 2;
	}
	for (long i = 0; i < n; i++) {
		struct node *b = malloc(sizeof(*b));
		if (!b)
			return 1;
		b->next = NULL;
		if (leak > 0 && i % leak == leak - 1) {
			lost++;
			continue; /* nothing points to it */
		}
		*tail = b;
		tail = &b->next;
	}
	printf("blocks=%ld lost=%ld\n", n, lost);
	fflush(stdout);
	return 0;
}
