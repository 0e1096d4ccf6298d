// The dlopen'ed part of stack.c's call chain.
__attribute__((noinline)) int plugin_through(int (*f)(int), int n) {
	int r = f(n * 3);
	__asm__ volatile("" ::: "memory"); // a call, not a tail call
	return r + 1;
}
