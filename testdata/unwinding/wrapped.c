/* wrapped.c: calls wraplib.c's wrappers; who is charged depends on the rule. */
void *xmalloc(unsigned long n);
void *my_alloc(unsigned long n);
void *deep_alloc(unsigned long n);

void *volatile sink;

__attribute__((noipa)) void use_x(void)
{
	sink = xmalloc(24); /* @site use_x */
	sink = 0;
}

__attribute__((noipa)) void use_my(void)
{
	sink = my_alloc(32); /* @site use_my */
	sink = 0;
}

__attribute__((noipa)) void use_deep(void)
{
	sink = deep_alloc(40); /* @site use_deep */
	sink = 0;
}

int main(void)
{
	use_x();
	use_my();
	use_deep();
	return 0;
}
