package report

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memtrace/memtrace/internal/symbolize"
)

func TestFrameLabels(t *testing.T) {
	tests := []struct {
		name                  string
		f                     symbolize.Frame
		function, loc, module string
	}{
		{"resolved",
			symbolize.Frame{Address: 0x401a2b, Function: "make_buffer", File: "src/buf.c", Line: 42, Module: "/usr/bin/myserver"},
			"make_buffer", "src/buf.c:42", "myserver"},
		{"no line",
			symbolize.Frame{Function: "f", File: "a.c", Module: "/bin/a"},
			"f", "a.c", "a"},
		{"symbol only",
			symbolize.Frame{Address: 0x7f00, Function: "g", Module: "/lib/libc.so.6", Offset: 0x10},
			"g", "-", "libc.so.6"},
		{"unknown function in a module",
			symbolize.Frame{Address: 0x7f3a00001234, Module: "/usr/lib/libfoo.so", Offset: 0x1234},
			"[unknown] libfoo.so+0x1234", "-", "libfoo.so"},
		{"address in no mapping",
			symbolize.Frame{Address: 0xdeadbeef},
			"[unknown] 0xdeadbeef", "-", "[unknown]"},
	}
	for _, tt := range tests {
		if got := functionLabel(tt.f); got != tt.function {
			t.Errorf("%s: functionLabel = %q, want %q", tt.name, got, tt.function)
		}
		if got := locationLabel(tt.f); got != tt.loc {
			t.Errorf("%s: locationLabel = %q, want %q", tt.name, got, tt.loc)
		}
		if got := moduleLabel(tt.f); got != tt.module {
			t.Errorf("%s: moduleLabel = %q, want %q", tt.name, got, tt.module)
		}
	}
}

func TestElideMiddle(t *testing.T) {
	long := "std::vector<std::pair<std::string, std::map<int, std::string>>>::_M_realloc_insert"
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcd…ghijk"},
		{long, 30, "std::vector<st…_realloc_insert"},
	}
	for _, tt := range tests {
		got := elideMiddle(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("elideMiddle(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > tt.max {
			t.Errorf("elideMiddle(%q, %d) is %d runes long", tt.in, tt.max, n)
		}
	}
}

func TestTrimLeadingDirs(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"src/buf.c:42", 20, "src/buf.c:42"},
		{"/build/glibc-abc/malloc/malloc.c:3301", 20, "…/malloc.c:3301"},
		{"/home/u/project/src/server/buf.c:42", 24, "…/src/server/buf.c:42"},
		{"/a/averyveryverylongfilename.c:1", 10, "…/averyveryverylongfilename.c:1"},
	}
	for _, tt := range tests {
		if got := trimLeadingDirs(tt.in, tt.max); got != tt.want {
			t.Errorf("trimLeadingDirs(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
	if got := locationLabel(symbolize.Frame{File: "/" + strings.Repeat("d/", 40) + "x.c", Line: 1}); utf8.RuneCountInString(got) > maxLocationWidth {
		t.Errorf("locationLabel of a deep path is %q, longer than %d", got, maxLocationWidth)
	}
}
