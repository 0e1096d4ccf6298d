// Fixture for unwind/'s walk test: builds a known call chain that crosses
// a dlopen'ed library, a stack-realigning (DRAP) function, libc's raise()
// and a signal frame, then, in the signal handler, writes its registers
// and its whole stack to argv[1] and /proc/self/maps to argv[1].maps. The
// test walks that snapshot with the unwind tables, as the BPF walker does.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *out;

static void copy_maps(const char *path) {
	int in = open("/proc/self/maps", O_RDONLY), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char buf[4096];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(fd, buf, n) != n)
			exit(3);
	close(in);
	close(fd);
}

static uintptr_t stack_end(void) {
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long lo, hi;
	uintptr_t end = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			end = hi;
	fclose(f);
	return end;
}

// capture: the leaf frame. The registers are read in one asm block, so the
// PC belongs to the rule in force where rsp was read.
__attribute__((noinline)) void capture(void) {
	uint64_t regs[4];
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]));
	regs[3] = stack_end();
	char maps[4096];
	snprintf(maps, sizeof maps, "%s.maps", out);
	copy_maps(maps);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	// The stack from the captured rsp up: the calls made since only wrote
	// below it.
	if (write(fd, regs, sizeof regs) != sizeof regs ||
	    write(fd, (void *)regs[1], regs[3] - regs[1]) != (ssize_t)(regs[3] - regs[1]))
		exit(4);
	close(fd);
}

static void handler(int sig) {
	capture();
	__asm__ volatile("" ::: "memory"); // keep capture() a call, not a tail call
	(void)sig;
}

__attribute__((noinline)) int level3(int n) {
	raise(SIGUSR1);
	__asm__ volatile("" ::: "memory");
	return n + 1;
}

// Over-aligned locals and stack arguments: GCC realigns the stack through
// a DRAP register (CFA = *(rbp-16)).
__attribute__((noinline)) int drap(int a, int b, int c, int d, int e, int f, int g, int n) {
	char buf[64] __attribute__((aligned(64)));
	char *v = __builtin_alloca(n);
	memset(buf, n + g, sizeof buf);
	memset(v, a, n);
	int r = level3(buf[3] + v[1]);
	__asm__ volatile("" : : "r"(buf), "r"(v) : "memory");
	return r + a + b + c + d + e + f;
}

__attribute__((noinline)) int level1(int n) {
	int r = drap(1, 2, 3, 4, 5, 6, 7, n + 16);
	__asm__ volatile("" ::: "memory");
	return r * 2;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: stack OUT PLUGIN\n");
		return 2;
	}
	out = argv[1];
	signal(SIGUSR1, handler);
	void *lib = dlopen(argv[2], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	int (*through)(int (*)(int), int) = (int (*)(int (*)(int), int))dlsym(lib, "plugin_through");
	int r = through(level1, argc);
	printf("%d\n", r);
	return 0;
}
