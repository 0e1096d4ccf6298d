// newdelete.cc: N x (new 64 bytes; delete), timed inside the program, for
// the cost of memtrace's wrapper probes on operator new. Prints ns per pair.
#include <cstdio>
#include <cstdlib>
#include <ctime>

struct Node {
	char data[64];
};

Node *volatile sink;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		Node *p = new Node;
		sink = p;
		delete p;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("%.1f\n", ns / n);
	return 0;
}
