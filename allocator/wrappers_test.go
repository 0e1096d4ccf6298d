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
		// The allocator itself and ordinary functions are not wrappers.
		{"malloc", false}, {"calloc", false}, {"realloc", false}, {"free", false}, {"je_malloc", false},
		{"zfree", false}, {"xfree", false}, {"g_free", false}, {"sqlite3VdbeExec", false},
		{"sqlite3VdbeMemGrow", false}, {"main", false}, {"xml_parse", false}, {"", false},
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
