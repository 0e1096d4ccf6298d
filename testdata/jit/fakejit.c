// fakejit: a JIT of its own. It maps executable code holding three small
// functions (A, B, C) that call malloc with frame pointers, as V8's code
// does, and names them in its own perf map, /tmp/perf-PID.map, in steps
// driven by lines on stdin, so that the map grows while memtrace runs:
//
//   start:  writes A's line; prints "ready BASE" (the code's address)
//   "1":    A allocates 10 blocks of 1000 bytes; writes half of B's line
//           (no newline yet); B allocates 20 blocks of 1000; prints "1 done"
//   "2":    ends B's line; writes C's line twice, the second naming it
//           anew; C allocates 30 blocks of 1000; prints "2 done"
//   "exit": exits, the blocks still live
//
// Each function is 32 bytes at BASE + 32*i; its call's return address is
// BASE + 32*i + 16. With argv[1] "symlink" the map is a symlink to a file
// with the same text, and with "chown" it is owned by uid 4242: memtrace
// must not read either (perf does not).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef void *(*alloc_fn)(size_t);

static unsigned char *code;
static FILE *map;
static char path[64];

// emit writes: push rbp; mov rbp,rsp; movabs rax,malloc; call rax; pop rbp; ret.
static void emit(unsigned char *p) {
	void *(*m)(size_t) = malloc;
	uint64_t target = (uint64_t)(uintptr_t)m;
	unsigned char head[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8};
	memcpy(p, head, sizeof head);
	memcpy(p + 6, &target, 8);
	unsigned char tail[] = {0xff, 0xd0, 0x5d, 0xc3};
	memcpy(p + 14, tail, sizeof tail);
}

static void run(int i, int n) {
	alloc_fn f = (alloc_fn)(void *)(code + 32 * i);
	for (int k = 0; k < n; k++) {
		void *b = f(1000);
		memset(b, 1, 1000);
	}
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	for (int i = 0; i < 3; i++)
		emit(code + 32 * i);
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC))
		return 1;
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	unlink(path);
	if (!strcmp(mode, "symlink")) {
		char real[80];
		snprintf(real, sizeof real, "/tmp/fakejit-real-%d.map", getpid());
		map = fopen(real, "w");
		if (!map || symlink(real, path))
			return 1;
	} else {
		map = fopen(path, "w");
		if (!map)
			return 1;
		if (!strcmp(mode, "chown") && fchown(fileno(map), 4242, 4242))
			return 1;
	}
	uintptr_t base = (uintptr_t)code;
	fprintf(map, "%lx 20 fake::alloc one(int)\n", (unsigned long)base);
	fflush(map);
	printf("ready %lx\n", (unsigned long)base);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strcmp(line, "1\n")) {
			run(0, 10);
			fprintf(map, "%lx 20 fake::alloc", (unsigned long)(base + 32));
			fflush(map);
			run(1, 20);
			printf("1 done\n");
		} else if (!strcmp(line, "2\n")) {
			fprintf(map, " two(int)\n%lx 20 C old\n%lx 20 C new\n", (unsigned long)(base + 64),
				(unsigned long)(base + 64));
			fflush(map);
			run(2, 30);
			printf("2 done\n");
		} else if (!strcmp(line, "exit\n")) {
			break;
		}
	}
	fclose(map);
	return 0;
}
