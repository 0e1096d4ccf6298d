// The classes of a leak check from C++: operator new and new[] (charged to
// their caller), a std::list off a global, and the two C++ heuristics of
// valgrind (new[] of objects with a destructor, whose pointer is 8 bytes
// into the block; a base class that is not first in a multiply inherited
// object). Compared with valgrind --leak-check=full by
// cmd/memtrace/e2e_leak_test.go.
//
//   leak_object    new Widget (40 B):                 definitely lost
//   leak_tree      a 3-node tree (3 x 24 B):          root definitely lost, 2 indirectly lost
//   leak_array     new Counted[3] (8 + 3 x 16 B):     definitely lost
//   leak_interior  new char[64], held at +16:         possibly lost
//   keep_object    new Widget in a global:            still reachable
//   keep_list      new std::list<long> in a global,
//                  and its 3 nodes (16 + 3 x 24 B):   still reachable
//   keep_array     new Counted[4] in a global:        still reachable (newarray heuristic)
//   keep_derived   new Derived held as Right*:        still reachable (multipleinheritance heuristic)
//
// No iostreams: the C++ runtime's own allocations (the exception emergency
// pool) are what valgrind frees at exit and memtrace suppresses by default.
#include <cstring>
#include <list>

struct Widget {
	long a[5];
};

struct Tree {
	Tree *left, *right;
	long value;
};

struct Counted {
	long a, b;
	~Counted() { __asm__ volatile("" : : "r"(this) : "memory"); }
};

struct Left {
	virtual ~Left() {}
	virtual long f() { return 1; }
	long l = 1;
};

struct Right {
	virtual ~Right() {}
	virtual long g() { return 2; }
	long r = 2;
};

struct Derived : Left, Right {
	long f() override { return 3; }
	long g() override { return 4; }
	long d = 3;
};

static Widget *volatile g_widget;
static std::list<long> *volatile g_list;
static Counted *volatile g_counted;
static Right *volatile g_right;
static char *volatile g_interior;

__attribute__((noinline)) static void sink(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

__attribute__((noinline)) void leak_object() {
	Widget *w = new Widget(); // @site leak_object
	sink(w);
}

__attribute__((noinline)) void leak_tree() {
	Tree *root = new Tree();  // @site leak_tree
	root->left = new Tree();  // @site leak_tree_left
	root->right = new Tree(); // @site leak_tree_right
	sink(root);
}

__attribute__((noinline)) void leak_array() {
	Counted *c = new Counted[3](); // @site leak_array
	sink(c);
}

__attribute__((noinline)) void leak_interior() {
	char *p = new char[64](); // @site leak_interior
	g_interior = p + 16;
}

__attribute__((noinline)) void keep_object() {
	g_widget = new Widget(); // @site keep_object
}

__attribute__((noinline)) void keep_list() {
	std::list<long> *l = new std::list<long>(); // @site keep_list
	for (long i = 0; i < 3; i++)
		l->push_back(i); // @site keep_list_node
	g_list = l;
}

__attribute__((noinline)) void keep_array() {
	g_counted = new Counted[4](); // @site keep_array
}

__attribute__((noinline)) void keep_derived() {
	g_right = new Derived(); // @site keep_derived
}

__attribute__((noinline)) static void scrub() {
	volatile char buf[64 << 10];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = 0;
}

int main() {
	leak_object();
	leak_tree();
	leak_array();
	leak_interior();
	keep_object();
	keep_list();
	keep_array();
	keep_derived();
	scrub();
	return 0;
}
