package symbolize

import "testing"

func TestShortName(t *testing.T) {
	tests := []struct {
		in           string
		noArgs, bare string
	}{
		{"malloc", "malloc", "malloc"},
		{"leak_new()", "leak_new()", "leak_new()"},
		{"std::less<>::operator()(int const&, int const&) const", "std::less<>::operator()(int const&, int const&) const", "std::less<>::operator()(…) const"},
		{"make_buffer(unsigned long)", "make_buffer(unsigned long)", "make_buffer(…)"},
		{"std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
			"std::vector<…>::_M_realloc_insert<…>(__gnu_cxx::__normal_iterator<…>, int const&)",
			"std::vector<…>::_M_realloc_insert<…>(…)"},
		{"(anonymous namespace)::cache::get(int) const", "(anonymous namespace)::cache::get(int) const", "(anonymous namespace)::cache::get(…) const"},
		{"std::operator<< <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)",
			"std::operator<< <…>(std::basic_ostream<…>&, char const*)", "std::operator<< <…>(…)"},
		{"Foo::operator()(int) const", "Foo::operator()(int) const", "Foo::operator()(…) const"},
		{"bool operator<<int>(A<int> const&, A<int> const&)", "bool operator<<int>(A<…> const&, A<…> const&)", "bool operator<<int>(…)"},
		{"Foo::operator->()", "Foo::operator->()", "Foo::operator->()"},
		{"<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop", "<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop", "<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop"},
		{"store::Pool<long>::grab(unsigned long)", "store::Pool<…>::grab(unsigned long)", "store::Pool<…>::grab(…)"},
		{"f<(1>2)>(int)", "f<…>(int)", "f<…>(…)"},
		{"main::{lambda(int)#1}::operator()(int) const", "main::{lambda(int)#1}::operator()(int) const", "main::{lambda(…)#1}::operator()(…) const"},
		{"broken<unclosed(int", "broken<unclosed(int", "broken<unclosed(int"},
		{"g(int", "g(int", "g(int"},
		{"std::foo() [clone .cold]", "std::foo() [clone .cold]", "std::foo() [clone .cold]"},
	}
	for _, tc := range tests {
		if got := ShortName(tc.in, FullName); got != tc.in {
			t.Errorf("ShortName(%q, FullName) = %q", tc.in, got)
		}
		if got := ShortName(tc.in, NoTemplateArgs); got != tc.noArgs {
			t.Errorf("ShortName(%q, NoTemplateArgs) = %q, want %q", tc.in, got, tc.noArgs)
		}
		if got := ShortName(tc.in, NoTemplateArgsOrParams); got != tc.bare {
			t.Errorf("ShortName(%q, NoTemplateArgsOrParams) = %q, want %q", tc.in, got, tc.bare)
		}
	}
}
