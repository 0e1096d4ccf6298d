// One definitely lost block, from leaky_function, for --fail-on-leak and
// --suppressions (cmd/memtrace/e2e_leak_test.go). `onleak none` leaks
// nothing; a second argument is the exit status.
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void sink(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

__attribute__((noinline)) void leaky_function(void) {
	char *p = malloc(48); // @site leaky_function
	memset(p, 7, 48);
	sink(p);
}

__attribute__((noinline)) static void scrub(void) {
	volatile char buf[64 << 10];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

int main(int argc, char **argv) {
	if (argc < 2 || strcmp(argv[1], "none") != 0)
		leaky_function();
	scrub();
	return argc > 2 ? atoi(argv[2]) : 0;
}
