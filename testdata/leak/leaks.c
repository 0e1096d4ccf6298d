// The five classes of a leak check, each from its own function, to compare
// memtrace's figures with valgrind --leak-check=full on the same binary
// (cmd/memtrace/e2e_leak_test.go). No stdio: libc allocates nothing for
// itself, so every live block is one of these.
//
//   leak_dropped   100 B, 1 block:   definitely lost (the pointer is dropped)
//   leak_list      5 x 32 B:         head definitely lost, 4 indirectly lost
//   leak_interior  64 B, 1 block:    possibly lost (only an interior pointer)
//   keep_global    200 B, 1 block:   still reachable (a global holds it)
//   keep_chain     3 x 48 B:         still reachable (a chain off a global)
//
// Memory is written before it is dropped (valgrind only follows defined
// words), and the stack is scrubbed before exit so that no stale pointer
// stays in a frame the exit path reuses.
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	long payload[3];
};

struct link {
	struct link *next;
	long payload[5];
};

static void *volatile held;         // keep_global's block
static struct link *volatile chain; // keep_chain's first block
static char *volatile interior;     // points 16 bytes into leak_interior's block

// sink makes the compiler believe p escapes, so the allocation stays.
__attribute__((noinline)) static void sink(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

__attribute__((noinline)) void leak_dropped(void) {
	char *p = malloc(100); // @site leak_dropped
	memset(p, 1, 100);
	sink(p);
}

__attribute__((noinline)) void leak_list(void) {
	struct node *head = NULL;
	for (int i = 0; i < 5; i++) {
		struct node *n = calloc(1, sizeof *n); // @site leak_list
		n->next = head;
		head = n;
	}
	sink(head);
}

__attribute__((noinline)) void leak_interior(void) {
	char *p = malloc(64); // @site leak_interior
	memset(p, 0, 64);
	interior = p + 16;
}

__attribute__((noinline)) void keep_global(void) {
	void *p = malloc(200); // @site keep_global
	memset(p, 2, 200);
	held = p;
}

__attribute__((noinline)) void keep_chain(void) {
	struct link *first = NULL;
	for (int i = 0; i < 3; i++) {
		struct link *l = calloc(1, sizeof *l); // @site keep_chain
		l->next = first;
		first = l;
	}
	chain = first;
}

// scrub overwrites the stack below main's frame, where the functions above
// left copies of their pointers.
__attribute__((noinline)) static void scrub(void) {
	volatile char buf[64 << 10];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

int main(void) {
	leak_dropped();
	leak_list();
	leak_interior();
	keep_global();
	keep_chain();
	scrub();
	return 0;
}
