// hostile_names: a program whose names try to drive the terminal of
// whoever traces it (TestHostileNames). It renames itself with escape
// sequences and an invalid UTF-8 byte (prctl), is run from a file whose
// name holds them too, and passes HTML and escape sequences to its mark
// function, memtrace_mark (--mark memtrace_mark). With the argument
// "wait" it prints "ready" once it has allocated and waits for its
// standard input to close; it then leaks a block and exits.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

// The name: an OSC that sets the terminal's title, a BEL, a "clear the
// screen", then a byte that is not UTF-8 (15 bytes at most: comm's size).
#define HOSTILE "\x1b]0;PWN\x07\x1b[2J\xff"

__attribute__((noinline)) void memtrace_mark(const char *label) {
	__asm__ volatile("" ::"r"(label) : "memory");
}

__attribute__((noinline)) void *hostile_alloc(size_t n) {
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}

int main(int argc, char **argv) {
	if (prctl(PR_SET_NAME, HOSTILE, 0, 0, 0) != 0) {
		perror("prctl");
		return 1;
	}
	memtrace_mark("<script>alert(1)</script></title><title>PWN");
	memtrace_mark("\x1b]0;PWN\x07");
	memtrace_mark("tab\there");
	void *keep = hostile_alloc(64 << 10);
	for (int i = 0; i < 100; i++)
		free(hostile_alloc(4096));
	if (argc > 1 && strcmp(argv[1], "wait") == 0) {
		printf("ready\n");
		fflush(stdout);
		char buf[64];
		while (read(0, buf, sizeof buf) > 0)
			;
	}
	hostile_alloc(32 << 10); // leaked
	return keep == NULL;
}
