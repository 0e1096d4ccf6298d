// Fixture for unwind/: functions whose call frame information covers the
// shapes the table builder must handle. Compiled by unwind's tests with
// several flag sets (-fomit-frame-pointer, -fno-omit-frame-pointer,
// .debug_frame only) and compared row by row with readelf's interpreter.
#include <alloca.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void sink(void *p, long n) {
	__asm__ volatile("" : : "r"(p), "r"(n) : "memory");
}

// Many callee-saved registers: a push per register, CFA offsets per push.
__attribute__((noinline)) long pushes(long a, long b, long c, long d, long e, long f) {
	long x[8];
	for (int i = 0; i < 8; i++) {
		x[i] = a * i + b * c - d + e * f;
		sink(x, i);
	}
	return x[3] + x[5] * a;
}

// alloca: the compiler needs a frame pointer (CFA = rbp+16).
__attribute__((noinline)) long dynamic(int n) {
	char *p = alloca(n);
	memset(p, n, n);
	sink(p, n);
	return p[n / 2];
}

// Over-aligned locals with arguments on the stack: GCC realigns through a
// DRAP register (CFA = *(rbp-16)).
__attribute__((noinline)) int realign(int a, int b, int c, int d, int e, int f, int g, int n) {
	char buf[64] __attribute__((aligned(64)));
	char *v = alloca(n);
	memset(buf, n + g, sizeof buf);
	sink(buf, g);
	sink(v, n);
	return buf[3] + a + b + c + d + e + f;
}

// A frame larger than a 16-bit offset: rows become undefined in the table.
__attribute__((noinline)) int huge(int n) {
	volatile char big[70000];
	big[n] = 1;
	sink((void *)big, n);
	return big[n + 1];
}

// Early returns in the middle: remember_state / restore_state.
__attribute__((noinline)) long branches(long n) {
	if (n < 0)
		return -1;
	long a = pushes(n, n + 1, n + 2, n + 3, n + 4, n + 5);
	if (a == 42)
		return a;
	long b = pushes(a, n, a, n, a, n);
	return a + b;
}

__attribute__((noinline)) int variadic(int n, ...) {
	va_list ap;
	va_start(ap, n);
	int s = 0;
	for (int i = 0; i < n; i++)
		s += va_arg(ap, int);
	va_end(ap);
	return s;
}

static volatile sig_atomic_t got;

static void handler(int sig) {
	got = sig;
	sink((void *)&got, sig);
}

int main(int argc, char **argv) {
	signal(SIGUSR1, handler);
	raise(SIGUSR1);
	int n = argc + 16;
	long r = branches(argc) + dynamic(n) + realign(1, 2, 3, 4, 5, 6, 7, n) + variadic(3, 1, 2, 3);
	if (argc > 5)
		r += huge(argc);
	char *s = malloc(16);
	snprintf(s, 16, "%ld", r);
	puts(s);
	free(s);
	return got == SIGUSR1 ? 0 : 1;
}
