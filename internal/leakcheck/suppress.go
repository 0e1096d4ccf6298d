package leakcheck

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Frame is what a suppression is matched against, for one frame of a
// block's allocation stack.
type Frame struct {
	Function string
	File     string
	Module   string
	// Inlined are the functions and files of code inlined at this frame.
	Inlined []InlinedFrame
}

// InlinedFrame is one source-level frame inlined into a Frame.
type InlinedFrame struct {
	Function, File string
}

// Suppression is one `leak:PATTERN` line.
type Suppression struct {
	Pattern string
	// Source says where it came from ("FILE:LINE", or "default").
	Source string
	// Kinds are the classes it suppresses (all for a user's suppression).
	Kinds Kinds
	// Top: match the allocation's call site only, not the whole stack.
	Top bool
	// Why documents a built-in default.
	Why string
}

// Suppressions is a list of suppressions.
type Suppressions []Suppression

// ParseSuppressions reads LeakSanitizer's suppression format: one
// `leak:PATTERN` per line, `#` comments and blank lines ignored. PATTERN
// is matched against the function name, the source file and the module
// path of every frame of a block's allocation stack; it matches a part of
// the name unless anchored with ^ (start) or $ (end), and * matches any
// run of characters.
func ParseSuppressions(r io.Reader, name string) (Suppressions, error) {
	var out Suppressions
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		typ, pat, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(typ) != "leak" {
			return nil, fmt.Errorf("%s:%d: %q: want leak:PATTERN", name, n, l)
		}
		pat = strings.TrimSpace(pat)
		if pat == "" {
			return nil, fmt.Errorf("%s:%d: empty pattern", name, n)
		}
		if !utf8.ValidString(pat) {
			return nil, fmt.Errorf("%s:%d: pattern %q is not valid UTF-8", name, n, pat)
		}
		out = append(out, Suppression{Pattern: pat, Source: fmt.Sprintf("%s:%d", name, n), Kinds: AllKinds})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

// ReadSuppressionFile parses a suppressions file.
func ReadSuppressionFile(path string) (Suppressions, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseSuppressions(f, path)
}

// DefaultSuppressions are the built-in suppressions: the runtime's own
// one-time allocations, kept in its globals for the life of the process.
// They match a block only while it is still reachable, and only by its
// call site (the code that called the allocator, wrappers such as
// operator new and strdup being charged to their caller): an allocation
// the C or C++ runtime made for itself — locale data, stdio buffers,
// libstdc++'s emergency exception-handling pool, the dynamic linker's
// thread-local storage. valgrind frees exactly these before its leak
// check (it runs glibc's __libc_freeres and libstdc++'s __gnu_cxx::__freeres
// at exit), so they are not in its figures either. A block the runtime
// allocated on the program's behalf that the program lost (a FILE from
// fopen never closed and no longer pointed to) is not suppressed.
var DefaultSuppressions = Suppressions{
	{Pattern: "/libc.so.6", Source: "default", Kinds: KindsOf(Reachable), Top: true,
		Why: "glibc's own allocations (locale, stdio buffers, NSS, …), freed by __libc_freeres under valgrind"},
	{Pattern: "/ld-linux-x86-64.so.2", Source: "default", Kinds: KindsOf(Reachable), Top: true,
		Why: "the dynamic linker's allocations (TLS, link maps of dlopen'ed libraries)"},
	{Pattern: "/libstdc++.so.6", Source: "default", Kinds: KindsOf(Reachable), Top: true,
		Why: "libstdc++'s own allocations (the emergency exception pool, locale facets), freed by __gnu_cxx::__freeres under valgrind"},
	{Pattern: "/libgcc_s.so.1", Source: "default", Kinds: KindsOf(Reachable), Top: true,
		Why: "the unwinder's caches"},
}

// Match returns the first suppression matching a block of class c
// allocated at stack (innermost first), or nil.
func (ss Suppressions) Match(c Class, stack []Frame) *Suppression {
	for i := range ss {
		s := &ss[i]
		if !s.Kinds.Has(c) {
			continue
		}
		frames := stack
		if s.Top && len(frames) > 1 {
			frames = frames[:1]
		}
		for _, f := range frames {
			if s.matchFrame(f) {
				return s
			}
		}
	}
	return nil
}

func (s *Suppression) matchFrame(f Frame) bool {
	if TemplateMatch(s.Pattern, f.Module) {
		return true
	}
	if s.Top && s.Source == "default" {
		return false // the built-ins name modules only
	}
	if TemplateMatch(s.Pattern, f.Function) || TemplateMatch(s.Pattern, f.File) {
		return true
	}
	for _, in := range f.Inlined {
		if TemplateMatch(s.Pattern, in.Function) || TemplateMatch(s.Pattern, in.File) {
			return true
		}
	}
	return false
}

// TemplateMatch matches s against a sanitizer suppression pattern: a
// substring match where * matches any run of characters, a leading ^
// anchors at the start and a trailing $ at the end. An empty s never
// matches.
func TemplateMatch(pattern, s string) bool {
	if s == "" {
		return false
	}
	return compileTemplate(pattern).MatchString(s)
}

var templateCache sync.Map // pattern -> *regexp.Regexp

// validUTF8 replaces each byte of s that is not valid UTF-8 by U+FFFD, as
// the matcher reads such a byte of the name: a regexp must be valid
// UTF-8 (MustCompile panicked on a pattern that was not).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func compileTemplate(pattern string) *regexp.Regexp {
	if re, ok := templateCache.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	p := pattern
	var b strings.Builder
	if strings.HasPrefix(p, "^") {
		b.WriteString("^")
		p = p[1:]
	}
	end := strings.HasSuffix(p, "$")
	if end {
		p = p[:len(p)-1]
	}
	for i, part := range strings.Split(p, "*") {
		if i > 0 {
			b.WriteString("(?s:.*)")
		}
		b.WriteString(regexp.QuoteMeta(validUTF8(part)))
	}
	if end {
		b.WriteString("$")
	}
	re := regexp.MustCompile(b.String())
	templateCache.Store(pattern, re)
	return re
}
