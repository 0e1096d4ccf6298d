// badalloc.cc: a C++ program whose exceptions unwind out of operator new.
// It catches std::bad_alloc from a new that cannot succeed, then an
// exception thrown by its own new_handler, and exits with status 3 when
// both were caught. Tracing must not change any of it: a return probe on
// operator new would leave the unwinder unable to cross its trampoline,
// and the program would abort instead. With "wait" it first says "ready"
// and waits for a line on stdin (for memtrace -p).
#include <cstdio>
#include <cstring>
#include <new>
#include <unistd.h>

struct from_handler {};

static void throwing_handler() { throw from_handler(); }

volatile unsigned long huge = 1UL << 62; // no allocator can give this
char *volatile sink;

__attribute__((noipa)) char *ask() { return new char[huge]; }

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "wait") == 0) {
		char line[8];
		write(1, "ready\n", 6);
		if (read(0, line, sizeof line) <= 0)
			return 1;
	}
	int caught = 0;
	try {
		ask();
	} catch (const std::bad_alloc &e) {
		caught++;
		printf("caught %s\n", e.what());
	}
	std::set_new_handler(throwing_handler);
	try {
		ask();
	} catch (const from_handler &) {
		caught++;
		printf("caught the new_handler's exception\n");
	}
	std::set_new_handler(nullptr);
	char *p = new (std::nothrow) char[huge];
	printf("nothrow new returned %s\n", p ? "a block" : "null");
	sink = new char[100]; // charged to main, not to operator new
	delete[] sink;
	return caught == 2 ? 3 : 1;
}
