package textsafe

import (
	"bytes"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "redis-server", "redis-server"},
		{"path", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		{"cxx name", "std::vector<int, std::allocator<int> >::push_back(int const&)", "std::vector<int, std::allocator<int> >::push_back(int const&)"},
		{"utf-8 kept", "größe-進程", "größe-進程"},
		{"nbsp kept", "a\u00a0b", "a\u00a0b"},
		{"backslash kept", `C:\x1b`, `C:\x1b`},
		{"osc title", "\x1b]0;PWN\x07", `\x1b]0;PWN\x07`},
		{"clear screen", "\x1b[2J\x1b[3J", `\x1b[2J\x1b[3J`},
		{"nul", "a\x00b", `a\x00b`},
		{"tab newline return", "a\tb\nc\rd", `a\tb\nc\rd`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1 csi", "a\u009b2J", `a\u009b2J`},
		{"c1 nel", "a\u0085b", `a\u0085b`},
		{"line separator", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"bidi override", "evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
		{"zero width space", "a\u200bb", `a\u200bb`},
		{"bom", "\ufeffname", `\ufeffname`},
		{"private use above bmp", "a\U000f0000", `a\U000f0000`},
		{"invalid byte", "a\xffb", `a\xffb`},
		{"truncated rune", "ab\xe4\xb8", `ab\xe4\xb8`},
		{"overlong slash", "\xc0\xaf", `\xc0\xaf`},
		{"surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"c1 as latin-1 byte", "a\x9bb", `a\x9bb`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in)
			if got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := String(got); again != got {
				t.Errorf("String is not idempotent: String(%q) = %q", got, again)
			}
			if Safe(tc.in) != (tc.in == tc.want) {
				t.Errorf("Safe(%q) = %v", tc.in, Safe(tc.in))
			}
		})
	}
}

// TestStringWidth checks the columns an escaped name takes: one per
// character of the result, so tables built from it stay aligned.
func TestStringWidth(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
	}{
		{"\x1b[2J", len(`\x1b[2J`)},
		{"a\u202eb", len(`a\u202eb`)},
		{"a\xffb", len(`a\xffb`)},
		{"a\u200bb", len(`a\u200bb`)},
		{"進程", 4},
	} {
		if got := runewidth.StringWidth(String(tc.in)); got != tc.width {
			t.Errorf("width of String(%q) = %d, want %d", tc.in, got, tc.width)
		}
	}
}

func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"plain", []string{"pid 1 init\n\tlive: 1 KiB\n"}, "pid 1 init\n\tlive: 1 KiB\n"},
		{"controls", []string{"pid 1 \x1b]0;x\x07\r\n"}, "pid 1 \\x1b]0;x\\x07\\x0d\n"},
		{"del", []string{"a\x7f"}, `a\u007f`},
		{"json with del and c1", []string{"{\"comm\":\"a\x7f\u009b\"}\n"}, `{"comm":"a\u007f\u009b"}` + "\n"},
		{"c1", []string{"a\u009bb"}, `a\u009bb`},
		{"c1 split", []string{"a\xc2", "\x9bb"}, `a\u009bb`},
		{"nbsp split", []string{"a\xc2", "\xa0b"}, "a\u00a0b"},
		{"utf-8 kept", []string{"größe 進程 █\n"}, "größe 進程 █\n"},
		{"json kept", []string{`{"comm":"\u001b]0;x"}` + "\n"}, `{"comm":"\u001b]0;x"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b)
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("wrote %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func BenchmarkStringPlain(b *testing.B) {
	for b.Loop() {
		String("std::vector<int, std::allocator<int> >::push_back(int const&)")
	}
}

// FuzzString: whatever the input, the result is valid UTF-8 with no
// control, format or separator character, and String leaves it as it is.
func FuzzString(f *testing.F) {
	f.Add("\x1b]0;PWN\x07\x1b[2J\xff")
	f.Add("evil\u202etxt\u2028")
	f.Fuzz(func(t *testing.T, in string) {
		out := String(in)
		if !utf8.ValidString(out) {
			t.Fatalf("String(%q) = %q: not UTF-8", in, out)
		}
		for _, r := range out {
			if !unicode.IsGraphic(r) {
				t.Fatalf("String(%q) = %q holds %U", in, out, r)
			}
		}
		if String(out) != out {
			t.Fatalf("String(%q) = %q, escaped again %q", in, out, String(out))
		}
		var b bytes.Buffer
		w := NewWriter(&b)
		w.Write([]byte(in))
		w.Flush()
		for i, c := range b.Bytes() {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				t.Fatalf("Writer wrote %#x at %d", c, i)
			}
		}
	})
}
