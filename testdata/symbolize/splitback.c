/*
 * splitback.c: GCC's partial inlining undone (symbolize/inline_test.go).
 * new_str's head (the size == 0 test) is split from its tail, which GCC
 * outlines as new_str.part.0 and then inlines back into new_str, kept out of
 * line because it is exported: DWARF then holds new_str inlined into
 * new_str, at the line declaring it. Python 3.11's PyUnicode_New is built
 * so, and was labelled "PyUnicode_New (inlined in PyUnicode_New)".
 * Build: gcc -O2 -g -fPIC -shared.
 */
#include <stdlib.h>
#include <string.h>

static char empty[64];

void *new_str(long size, unsigned maxchar)
{
	if (size == 0)
		return empty;
	long char_size = maxchar < 256 ? 1 : maxchar < 65536 ? 2 : 4;
	if (size < 0 || size > 1000000)
		return 0;
	char *p = malloc(48 + (size + 1) * char_size); /* @site new_str */
	if (!p)
		return 0;
	memset(p, 0, 48);
	*(long *)p = size;
	p[8] = (char)char_size;
	return p;
}

void *make(long n)
{
	return new_str(n, 70000);
}
