/*
 * chains.c: known call chains for the BPF unwinder, built with
 * -O2 -fomit-frame-pointer (no frame pointer anywhere): a call through the
 * PLT into a shared library (chainlib.c), an allocation in a signal
 * handler, and one in a dlopen'ed library (argv[1]) called through a
 * pointer. Every function is noipa, so each call stays a call.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

void *lib_alloc(unsigned long n); /* chainlib.c, through the PLT */

__attribute__((noipa)) void via_plt(void)
{
	sink = lib_alloc(40); /* @site via_plt */
}

__attribute__((noipa)) static void on_signal(int sig)
{
	sink = malloc(56); /* @site on_signal */
}

__attribute__((noipa)) void raise_it(void)
{
	raise(SIGUSR1); /* @site raise_it */
	sink = 0;       /* not a tail call: raise_it stays on the stack */
}

__attribute__((noipa)) void via_dlopen(const char *path)
{
	void *h = dlopen(path, RTLD_NOW);
	void (*fn)(void) = h ? (void (*)(void))dlsym(h, "plugin_leak") : 0;

	/*
	 * memtrace loads a dlopen'ed library's unwind table when it sees the
	 * dlopen return, in the background; stacks through it stop at its
	 * frames until then. Wait for a byte on stdin (the test sends it once
	 * memtrace -v says the table is in); at end of file, go on at once.
	 */
	char go;
	if (read(0, &go, 1) < 0)
		go = 0;
	if (fn)
		fn(); /* @site via_dlopen */
	sink = 0;
}

int main(int argc, char **argv)
{
	signal(SIGUSR1, on_signal);
	via_plt();  /* @site main_plt */
	raise_it(); /* @site main_raise */
	if (argc > 1)
		via_dlopen(argv[1]); /* @site main_dlopen */
	return 0;
}
