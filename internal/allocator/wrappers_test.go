package allocator

import "testing"

func TestAutoWrapper(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		// The families the rule is for.
		{"zmalloc", true}, {"zmalloc_usable", true}, {"ztrymalloc_usable", true}, {"zcalloc_num", true},
		{"zrealloc", true}, {"zstrdup", true},
		{"xmalloc", true}, {"xcalloc", true}, {"xrealloc", true}, {"xstrdup", true}, {"xmemdup", true},
		{"g_malloc", true}, {"g_malloc0", true}, {"g_realloc", true}, {"g_strdup", true}, {"g_try_malloc", true},
		{"ngx_alloc", true}, {"ngx_palloc", true}, {"ngx_pnalloc", true}, {"ngx_pcalloc", true},
		{"av_malloc", true}, {"av_mallocz", true}, {"av_realloc", true},
		{"PyMem_Malloc", true}, {"PyMem_RawMalloc", true}, {"PyObject_Malloc", true}, {"_PyObject_Malloc", true},
		{"sqlite3Malloc", true}, {"sqlite3MallocZero", true}, {"sqlite3DbMallocRaw", true}, {"sqlite3DbStrDup", true},
		{"sqlite3Realloc", true}, {"sqlite3MemMalloc", true}, {"sqlite3_malloc64", true},
		{"CRYPTO_malloc", true}, {"CRYPTO_zalloc", true}, {"CRYPTO_realloc", true}, {"CRYPTO_clear_realloc", true},
		{"CRYPTO_strdup", true}, {"Perl_safesysmalloc", true}, {"Perl_safesyscalloc", true},
		{"Perl_safesysrealloc", true}, {"ruby_xmalloc", true}, {"ruby_xmalloc2", true}, {"ruby_xrealloc2", true},
		{"luaM_malloc_", true}, {"luaM_realloc_", true}, {"_emalloc", true}, {"_emalloc_56", true},
		{"_safe_emalloc", true}, {"_estrdup", true}, {"apr_palloc", true}, {"apr_pcalloc", true},
		{"xmlMalloc", true}, {"xmlStrdup", true}, {"xmlMemMalloc", true}, {"g_slice_alloc0", true},
		// The allocator itself and ordinary functions are not wrappers.
		{"malloc", false}, {"calloc", false}, {"realloc", false}, {"free", false}, {"je_malloc", false},
		{"zfree", false}, {"xfree", false}, {"g_free", false}, {"sqlite3VdbeExec", false},
		{"sqlite3VdbeMemGrow", false}, {"main", false}, {"xml_parse", false}, {"", false},
		{"CRYPTO_free", false}, {"OPENSSL_sk_dup", false}, {"BUF_MEM_grow", false}, {"Perl_newSV", false},
		{"Perl_safesysfree", false}, {"ruby_xfree", false}, {"rb_ary_new", false}, {"luaM_free_", false},
		{"_efree", false}, {"encode", false}, {"exit", false}, {"apr_pool_create", false}, {"xmlFree", false},
		{"xmlParseFile", false},
	}
	for _, tt := range tests {
		if got := AutoWrapper(tt.name); got != tt.want {
			t.Errorf("AutoWrapper(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestWrapperRule(t *testing.T) {
	r := NewWrapperRule([]string{"_Znwm", "my_alloc"}, true, []string{"xmalloc", "my_alloc"})
	tests := []struct {
		name string
		want bool
	}{
		{"_Znwm", true},     // named
		{"zmalloc", true},   // automatic
		{"xmalloc", false},  // automatic, but exempted
		{"my_alloc", false}, // named and exempted: the exemption wins
		{"helper", false},
	}
	for _, tt := range tests {
		if got := r.Wraps(tt.name); got != tt.want {
			t.Errorf("Wraps(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if NewWrapperRule(nil, false, nil).Wraps("zmalloc") {
		t.Error("the automatic rule applies when turned off")
	}
}

// The C++ rule on the names HotSpot's libjvm.so (OpenJDK 17) really has.
func TestWrapperRuleQualified(t *testing.T) {
	def := NewWrapperRule(DefaultWrappers, true, nil)
	tests := []struct {
		rule WrapperRule
		name string
		want bool
	}{
		{def, "_ZN2os6mallocEm8MEMFLAGS", true},                                       // os::malloc(unsigned long, MEMFLAGS)
		{def, "_ZN2os6mallocEm8MEMFLAGSRK15NativeCallStack", true},                    // … NativeCallStack const&
		{def, "_ZN2os7reallocEPvm8MEMFLAGS", true},                                    // os::realloc
		{def, "_ZN2os6strdupEPKc8MEMFLAGS", true},                                     // os::strdup: strdup is a named wrapper
		{def, "_Z12AllocateHeapm8MEMFLAGSN17AllocFailStrategy13AllocFailEnumE", true}, // named, unqualified
		{def, "_Z14ReallocateHeapPcm8MEMFLAGSN17AllocFailStrategy13AllocFailEnumE", true},
		{def, "_ZN20NMTPreInitAllocation8do_allocEm", true},   // named, qualified
		{def, "_ZN2os16strdup_check_oomEPKc8MEMFLAGS", true},  // named, qualified
		{def, "_ZNK3Foo7xmallocEv", true},                     // const method, automatic last component
		{def, "_ZNSt3pmr7reallocEv", true},                    // std:: prefix
		{def, "_ZL12AllocateHeapm", true},                     // local linkage
		{def, "_ZN2os4freeEPv", false},                        // releases: not a wrapper
		{def, "_ZN20NMTPreInitAllocation7do_freeEPS_", false}, // same class, other method
		{def, "_ZN7NMTUtil18_memory_type_namesE", false},      // a variable's name parses, names nothing
		{def, "_Z6mallocm", false},                            // unqualified malloc is the allocator itself
		{def, "_ZN3FooIiE6mallocEm", false},                   // templates are not read
		{def, "_ZN3FooC1Ev", false},                           // constructor
		{def, "_ZN99tooLongEv", false},                        // length past the end
		{def, "_Z", false}, {def, "_ZN", false}, {def, "_ZN2osE", false}, {def, "malloc", false},
		// Overridden both ways, by qualified or by mangled name.
		{NewWrapperRule(DefaultWrappers, true, []string{"os::malloc"}), "_ZN2os6mallocEm8MEMFLAGS", false},
		{NewWrapperRule(DefaultWrappers, true, []string{"_ZN2os6mallocEm8MEMFLAGS"}), "_ZN2os6mallocEm8MEMFLAGS", false},
		{NewWrapperRule(DefaultWrappers, true, []string{"_ZN2os6mallocEm8MEMFLAGS"}), "_ZN2os6mallocEm8MEMFLAGSRK15NativeCallStack", true},
		{NewWrapperRule(DefaultWrappers, true, []string{"AllocateHeap"}), "_Z12AllocateHeapm8MEMFLAGSN17AllocFailStrategy13AllocFailEnumE", false},
		{NewWrapperRule([]string{"Arena::Amalloc"}, true, nil), "_ZN5Arena7AmallocEm", true},
		{NewWrapperRule(nil, true, nil), "_Z12AllocateHeapm", false},         // --no-default-wrappers
		{NewWrapperRule(nil, false, nil), "_ZN2os6mallocEm8MEMFLAGS", false}, // --no-auto-wrappers
	}
	for _, tt := range tests {
		if got := tt.rule.Wraps(tt.name); got != tt.want {
			t.Errorf("Wraps(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
