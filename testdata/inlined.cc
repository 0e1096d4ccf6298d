// inlined.cc: C++ call sites for symbolization
// (cmd/memtrace/e2e_symbolize_test.go).
//
// store::Pool<long>::grab is inlined into leak_template and allocates with
// operator new[] (a wrapper: the call site is the call of operator new[],
// in grab's inlined code). inventory::Table<…>::insert is not inlined and
// has a name too long for the table, which shortens it. leak_local is in an
// anonymous namespace: a local symbol, absent from .dynsym.
#include <cstdlib>
#include <new>
#include <utility>

void *volatile sink;

namespace store {
template <typename T> struct Pool {
	__attribute__((always_inline)) inline T *grab(std::size_t n)
	{
		return new T[n]; // @site grab
	}
};
} // namespace store

__attribute__((noipa)) void leak_template()
{
	store::Pool<long> pool;
	sink = pool.grab(4); // 32 bytes @site leak_template
}

namespace inventory {
template <typename K, typename V> struct Table {
	__attribute__((noipa)) static void insert(K, V)
	{
		sink = std::malloc(sizeof(K) + sizeof(V)); // 32 bytes @site insert
	}
};
} // namespace inventory

namespace {
__attribute__((noipa)) void leak_local()
{
	sink = std::malloc(72); // @site leak_local
}
} // namespace

int main()
{
	leak_template();
	inventory::Table<std::pair<int, long>, std::pair<unsigned, double>>::insert({}, {});
	leak_local();
	return 0;
}
