// A parent that leaks nothing starts a child that leaks one block, waits
// for it and exits 0 (cmd/memtrace/e2e_leak_test.go, -f).
//
//   fork              fork(); the child runs leak_in_child (64 B, definitely
//                     lost), frees the block it inherited and exits
//   exec PROG ARGS…   fork() then execv(PROG): the leak is PROG's
//   spawn PROG ARGS…  posix_spawn(PROG) (a vfork-style clone)
//
// Both processes free `shared`, a block the child inherits: it is not lost.
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

__attribute__((noinline)) static void sink(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

__attribute__((noinline)) void leak_in_child(void) {
	char *p = malloc(64); // @site leak_in_child
	memset(p, 3, 64);
	sink(p);
}

__attribute__((noinline)) static void scrub(void) {
	volatile char buf[64 << 10];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

int main(int argc, char **argv) {
	char *shared = malloc(32); // @site shared
	memset(shared, 1, 32);
	const char *mode = argc > 1 ? argv[1] : "fork";
	pid_t pid;
	if (strcmp(mode, "spawn") == 0) {
		if (posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, environ) != 0)
			return 2;
	} else {
		pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			if (strcmp(mode, "exec") == 0) {
				execv(argv[2], argv + 2);
				_exit(127);
			}
			leak_in_child();
			free(shared);
			scrub();
			exit(0);
		}
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return 3;
	free(shared);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}
