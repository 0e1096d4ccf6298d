package leakcheck

import (
	"strings"
	"testing"
)

func TestTemplateMatch(t *testing.T) {
	for _, tt := range []struct {
		pat, s string
		want   bool
	}{
		{"leaky", "leaky_function", true},
		{"leaky", "not_leaky_at_all", true},
		{"^leaky", "not_leaky", false},
		{"^leaky", "leaky_function", true},
		{"function$", "leaky_function", true},
		{"function$", "leaky_function2", false},
		{"leak*fun", "leaky_function", true},
		{"^leak*tion$", "leaky_function", true},
		{"^leak*tion$", "leaky_functions", false},
		{"libfoo.so", "/usr/lib/libfoo.so.1", true},
		{"*", "x", true},
		{"x", "", false},
		{"std::vector<int>::push_back", "std::vector<int>::push_back(int&&)", true},
		{"a.c", "abc", false},
	} {
		if got := TemplateMatch(tt.pat, tt.s); got != tt.want {
			t.Errorf("TemplateMatch(%q, %q) = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}

func TestParseSuppressions(t *testing.T) {
	ss, err := ParseSuppressions(strings.NewReader("# comment\n\nleak:leaky_function\n  leak:libfoo.so  \n"), "supp.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].Pattern != "leaky_function" || ss[1].Pattern != "libfoo.so" || ss[1].Source != "supp.txt:4" {
		t.Fatalf("got %+v", ss)
	}
	for _, bad := range []string{"race:foo\n", "leak:\n", "leaky_function\n"} {
		if _, err := ParseSuppressions(strings.NewReader(bad), "f"); err == nil || !strings.Contains(err.Error(), "f:1") {
			t.Errorf("%q: err %v, want one naming f:1", bad, err)
		}
	}
}

func TestSuppressionMatchWholeStack(t *testing.T) {
	ss := Suppressions{{Pattern: "helper.c", Kinds: AllKinds}, {Pattern: "^inlined_fn$", Kinds: AllKinds}}
	stack := []Frame{
		{Function: "alloc_thing", File: "src/thing.c", Module: "/bin/prog"},
		{Function: "main", File: "src/helper.c", Module: "/bin/prog"},
	}
	if s := ss.Match(Definite, stack); s == nil || s.Pattern != "helper.c" {
		t.Errorf("match by a caller's file: %+v", s)
	}
	if s := ss.Match(Definite, stack[:1]); s != nil {
		t.Errorf("matched %+v without the caller", s)
	}
	inl := []Frame{{Function: "outer", Module: "/bin/prog", Inlined: []InlinedFrame{{Function: "inlined_fn"}}}}
	if s := ss.Match(Possible, inl); s == nil {
		t.Error("inlined frame not matched")
	}
}

func TestDefaultSuppressions(t *testing.T) {
	libc := []Frame{{Function: "_nl_find_locale", Module: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		{Function: "main", Module: "/bin/ls"}}
	if DefaultSuppressions.Match(Reachable, libc) == nil {
		t.Error("libc's reachable allocation not suppressed")
	}
	if DefaultSuppressions.Match(Definite, libc) != nil {
		t.Error("a lost block suppressed by default")
	}
	// Only the call site counts: user code called from libc's start-up is
	// not the runtime's.
	user := []Frame{{Function: "keep", Module: "/bin/prog"},
		{Function: "__libc_start_call_main", Module: "/usr/lib/x86_64-linux-gnu/libc.so.6"}}
	if DefaultSuppressions.Match(Reachable, user) != nil {
		t.Error("user allocation suppressed by a caller in libc")
	}
	// Module patterns only: a user function named like a library is not.
	if DefaultSuppressions.Match(Reachable, []Frame{{Function: "x/libc.so.6", Module: "/bin/prog"}}) != nil {
		t.Error("default matched a function name")
	}
}

func TestParseKinds(t *testing.T) {
	k, err := ParseKinds("definite,indirect")
	if err != nil || !k.Has(Definite) || !k.Has(Indirect) || k.Has(Possible) || k.Has(Reachable) {
		t.Errorf("got %v, %v", k, err)
	}
	if k.String() != "definite,indirect" {
		t.Errorf("String %q", k.String())
	}
	if k, _ := ParseKinds("all"); k != AllKinds {
		t.Error("all")
	}
	if k, _ := ParseKinds("none"); k != 0 {
		t.Error("none")
	}
	if _, err := ParseKinds("definite,bogus"); err == nil {
		t.Error("bogus kind accepted")
	}
	h, err := ParseHeuristics("stdstring,newarray")
	if err != nil || h != StdString|NewArray || h.String() != "stdstring,newarray" {
		t.Errorf("heuristics %v %v", h, err)
	}
}

// FuzzParseSuppressions: a suppressions file parses or fails with a
// message, and every pattern it yields compiles and matches.
func FuzzParseSuppressions(f *testing.F) {
	f.Add("# comment\nleak:^operator new$\nleak:libfoo.so*bar\n")
	f.Add("leak:")
	f.Fuzz(func(t *testing.T, in string) {
		ss, err := ParseSuppressions(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		for _, s := range ss {
			TemplateMatch(s.Pattern, in)
		}
	})
}

// TestTemplateInvalidUTF8: a pattern with bytes that are not UTF-8 (from
// a frame's name, say) compiles and matches the name it came from.
func TestTemplateInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"0\xbc0", "a0\xbc0b", true},
		{"^f\xff*g$", "f\xffxg", true},
		{"\xff", "ascii", false},
	} {
		if got := TemplateMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("TemplateMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
	if _, err := ParseSuppressions(strings.NewReader("leak:0\xbc0\n"), "f"); err == nil {
		t.Error("ParseSuppressions took a pattern that is not UTF-8")
	}
}
