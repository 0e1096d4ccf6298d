/*
 * Fixture for the symbolize tests. It allocates from known lines, prints
 * "TAG 0xADDR" for each with the return address into the allocating
 * function, and waits on stdin so the test can capture and resolve the
 * live process:
 *
 *   1. prints "MAIN 0xADDR" (where main is loaded, for the load bias), the
 *      LEAK_* lines and "READY1", then reads one line;
 *   2. if argv[1] names a shared library, dlopens it, calls lib_leak and
 *      prints its LIB_LEAK line; prints "READY2";
 *   3. waits for end of input, then exits.
 *
 * The test finds each line number by looking for the tag comment, so the
 * file can be edited freely.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone, used))

void *sink[8];

/* record prints the address record returns to, that is the instruction
 * after the call in its caller, and allocates as a leak would. */
NOINLINE void *record(const char *tag, size_t n) {
	printf("%s %p\n", tag, __builtin_return_address(0));
	return malloc(n);
}

/* The store after each call keeps the compiler from making it a tail call,
 * which would return past the function we want to see. */
NOINLINE void leak_a(void) {
	sink[0] = record("LEAK_A", 16); /* LEAK_A */
	__asm__ volatile("" ::: "memory");
}

NOINLINE void leak_b(int n) {
	for (int i = 0; i < n; i++) {
		sink[1 + i] = record("LEAK_B", 32 + i); /* LEAK_B */
		__asm__ volatile("" ::: "memory");
	}
}

/* A C function under a C++ mangled name, to check demangling without a
 * C++ compiler: it must resolve as "memtrace::leak_c()". */
void leak_c(void) __asm__("_ZN8memtrace6leak_cEv");
NOINLINE void leak_c(void) {
	sink[4] = record("LEAK_C", 48); /* LEAK_C */
	__asm__ volatile("" ::: "memory");
}

static void wait_line(void) {
	int c;
	while ((c = getchar()) != EOF && c != '\n')
		;
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("MAIN %p\n", (void *)&main);
	leak_a();
	leak_b(1);
	leak_c();
	printf("READY1\n");
	wait_line();
	if (argc > 1) {
		void *h = dlopen(argv[1], RTLD_NOW);
		if (h == NULL) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		void *(*lib_leak)(void) = (void *(*)(void))dlsym(h, "lib_leak");
		if (lib_leak == NULL) {
			fprintf(stderr, "dlsym: %s\n", dlerror());
			return 1;
		}
		sink[5] = lib_leak();
	}
	printf("READY2\n");
	while (getchar() != EOF)
		;
	return 0;
}
