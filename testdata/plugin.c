/* plugin.c: a library loaded with dlopen by dlopen.c and unloaded again. */
#include <stdlib.h>

void *volatile plugin_sink;

__attribute__((noipa)) void plugin_leak(void)
{
	for (int i = 0; i < 3; i++)
		plugin_sink = malloc(77); /* @site plugin_leak */
}
