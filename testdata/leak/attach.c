// A process memtrace attaches to with -p --leak-check
// (cmd/memtrace/e2e_leak_test.go). Before attaching it allocates `table`,
// which memtrace never sees allocated; after "go" it stores a new block
// only there (reachable: the unknown parts of the heap are roots under -p),
// drops one (definitely lost) and keeps one in a global (still reachable).
// It says "done", waits for a line, and exits with status 3 to show it ran
// on untouched after being stopped for the check.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void **volatile table;
static void *volatile kept;

__attribute__((noinline)) static void sink(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

__attribute__((noinline)) void in_old_block(void) {
	table[3] = malloc(40); // @site in_old_block
	memset(table[3], 0, 40);
}

__attribute__((noinline)) void dropped(void) {
	char *p = malloc(24); // @site dropped
	memset(p, 0, 24);
	sink(p);
}

__attribute__((noinline)) void kept_global(void) {
	kept = calloc(1, 72); // @site kept_global
}

__attribute__((noinline)) static void scrub(void) {
	volatile char buf[64 << 10];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

int main(void) {
	char line[64];
	table = calloc(16, sizeof *table);
	write(1, "ready\n", 6);
	if (read(0, line, sizeof line) <= 0)
		return 1;
	in_old_block();
	dropped();
	kept_global();
	scrub();
	write(1, "done\n", 5);
	if (read(0, line, sizeof line) <= 0)
		return 1;
	return 3;
}
