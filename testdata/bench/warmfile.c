/*
 * warmfile.c: the reclaim measurement's program (scripts/access_reclaim.sh).
 * It maps the file argv[1] and reads a byte of each of its pages, then
 * sleeps argv[3] ms, over and over for argv[2] seconds: a warm working set
 * of file pages. It prints its major faults: pages reclaim took from it
 * that it had to read back.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return 1;
	volatile unsigned char *p = mmap(0, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return 1;
	time_t end = time(0) + atol(argv[2]);
	unsigned long sum = 0;
	struct timespec pause = {atol(argv[3]) / 1000, atol(argv[3]) % 1000 * 1000000};
	while (time(0) < end) {
		for (off_t o = 0; o < st.st_size; o += 4096)
			sum += p[o];
		nanosleep(&pause, 0);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("majflt %ld sum %lu\n", ru.ru_majflt, sum & 1);
	return 0;
}
