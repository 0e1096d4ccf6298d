// cxx.cc: C++ allocations through libstdc++'s operator new (every variant)
// and libc's strdup, each in its own function. Debian's libstdc++ has no
// frame pointers: the wrapper probes are what charge these to the functions
// below rather than to operator new.
#include <cstdlib>
#include <cstring>
#include <new>

void *volatile sink;

struct Node {
	char data[48];
};

struct alignas(64) Aligned {
	char data[64];
};

__attribute__((noipa)) void leak_new()
{
	for (int i = 0; i < 4; i++)
		sink = new Node; // 4 x 48 @site leak_new()
}

__attribute__((noipa)) void leak_new_array() { sink = new int[100]; }              // 400 @site leak_new_array()
__attribute__((noipa)) void leak_nothrow() { sink = new (std::nothrow) char[10]; } // 10 @site leak_nothrow()
__attribute__((noipa)) void leak_aligned() { sink = new Aligned; }                 // 64, aligned new @site leak_aligned()
__attribute__((noipa)) void leak_strdup() { sink = strdup("hello"); }              // 6 @site leak_strdup()

__attribute__((noipa)) void churn_new()
{
	for (int i = 0; i < 1000; i++) {
		Node *n = new Node; // @site churn_new()
		sink = n;
		delete n;
	}
}

// Two callers of operator new in turn: the probes remember a thread's
// last charged caller past the wrapper, and must not charge b's to a.
// (No tail call: a frame of their own.)
__attribute__((noipa)) Node *make_a()
{
	Node *n = new Node; // @site make_a()
	sink = n;
	return n;
}

__attribute__((noipa)) Node *make_b()
{
	Node *n = new Node; // @site make_b()
	sink = n;
	return n;
}

__attribute__((noipa)) void alternate()
{
	for (int i = 0; i < 500; i++) {
		Node *a = make_a(), *b = make_b(), *c = make_b();
		delete a;
		delete b;
		delete c;
	}
}

int main()
{
	alternate();
	leak_new();
	leak_new_array();
	leak_nothrow();
	leak_aligned();
	leak_strdup();
	churn_new();
	return 0;
}
