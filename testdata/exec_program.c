/*
 * Prints where the ELF loader placed its code, as the kernel keeps it
 * (startcode and endcode, fields 26 and 27 of /proc/self/stat), and exits:
 * the exec record must carry the same range (tracer's TestExecProgram).
 * far_away lives in a section of its own, which symbolize's TestAddProgram
 * links into a second executable segment far from the first.
 */
#include <stdio.h>
#include <string.h>

__attribute__((noinline, section("far_code"))) int far_away(int x)
{
	return x * 3 + 1;
}

int main(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;
	char *p;
	unsigned long long start, end;

	if (!f)
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* The fields after the comm, which may hold spaces and parentheses. */
	p = strrchr(buf, ')');
	if (!p)
		return 1;
	/* Field 3 (state) follows ") "; skip to field 26. */
	p += 2;
	for (int field = 3; field < 26; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 1;
		p++;
	}
	if (sscanf(p, "%llu %llu", &start, &end) != 2)
		return 1;
	printf("%llx %llx\n", start, end);
	return far_away((int)n) > 0 ? 0 : 1;
}
