/*
 * dlopen.c: loads the library named by argv[1], calls its plugin_leak()
 * (3 x 77 bytes, leaked), unloads it, and exits: memtrace must still name
 * plugin_leak and its line, although the library is gone by then.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	void (*leak)(void) = (void (*)(void))dlsym(h, "plugin_leak");
	leak();
	dlclose(h);
	return 0;
}
