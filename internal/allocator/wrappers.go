package allocator

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// DefaultWrappers are functions that allocate on their caller's behalf:
// what they allocate is charged to the code that called them. The C++
// operator new family (every variant: nothrow, aligned, arrays) and libc's
// string and line helpers. No probe is placed on them: the return probe's
// stack walk recognizes their code (see WrapperRule).
var DefaultWrappers = []string{
	"_Znwm", "_Znam", // operator new(size_t), new[]
	"_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
	"_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
	"_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
	"strdup", "__strdup", "strndup", "__strndup", "wcsdup",
	"asprintf", "__asprintf", "vasprintf",
	"getline", "getdelim", "__getdelim",
	"realpath", "canonicalize_file_name", "get_current_dir_name", "tempnam",
	// HotSpot (the JVM): matched by qualified name, every overload (see Wraps).
	"AllocateHeap", "ReallocateHeap", "NMTPreInitAllocation::do_alloc", "os::strdup_check_oom",
	// HotSpot's Unsafe.allocateMemory (direct ByteBuffers): charged to
	// the Java code that called it (docs/runtimes-jit.md).
	"Unsafe_AllocateMemory0", "Unsafe_ReallocateMemory0",
	// node and V8: an ArrayBuffer's backing store (Buffer, typed arrays)
	// is allocated for the JS code that made it, through node's
	// allocator, V8's backing-store code, its C++ builtins and its
	// embedded builtins (Builtins_*, code without CFI that the walk
	// follows by frame pointers). A trailing * matches a prefix.
	"node::NodeArrayBufferAllocator::*", "node::DebuggingArrayBufferAllocator::*",
	"v8::ArrayBuffer::Allocator::*", "v8::ArrayBuffer::NewBackingStore",
	"v8::internal::Heap::AllocateExternalBackingStore", "v8::internal::BackingStore::*",
	"v8::internal::_GLOBAL__N_1::ConstructBuffer", "v8::internal::Builtin_*", "v8::internal::Builtin_Impl_*",
	"Builtins_*",
}

// ReadWrapperFile reads wrapper names, one per line; blank lines and lines
// starting with # are ignored.
func ReadWrapperFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read wrappers: %w", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		names = append(names, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read wrappers %s: %w", path, err)
	}
	return names, nil
}

// WrapperRule decides which functions are allocation wrappers: the named
// ones (DefaultWrappers, --wrapper, --wrappers), plus, with Auto, those
// whose name follows an allocation family's pattern (AutoWrapper), minus
// the excluded ones (--not-wrapper).
type WrapperRule struct {
	Names map[string]bool
	// Prefixes: names given with a trailing * ("Builtins_*") match every
	// name, or qualified name, that starts with the rest.
	Prefixes []string
	Auto     bool
	Not      map[string]bool
}

// NewWrapperRule builds a rule from names to include and to exclude.
func NewWrapperRule(names []string, auto bool, not []string) WrapperRule {
	r := WrapperRule{Names: map[string]bool{}, Auto: auto, Not: map[string]bool{}}
	for _, n := range names {
		if p, ok := strings.CutSuffix(n, "*"); ok && p != "" {
			r.Prefixes = append(r.Prefixes, p)
			continue
		}
		r.Names[n] = true
	}
	for _, n := range not {
		r.Not[n] = true
	}
	return r
}

// Key names the rule: two rules with one key decide alike (in one build
// of memtrace). Marked tables are cached under it.
func (r WrapperRule) Key() string {
	h := sha256.New()
	for _, set := range []map[string]bool{r.Names, r.Not} {
		names := slices.Sorted(maps.Keys(set))
		for _, n := range names {
			if set[n] {
				h.Write([]byte(n))
				h.Write([]byte{0})
			}
		}
		h.Write([]byte{1})
	}
	if r.Auto {
		h.Write([]byte("auto"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Wraps reports whether the function named name (as its symbol spells it,
// mangled or not) is an allocation wrapper. A mangled C++ name also
// matches by its qualified name without parameters ("os::malloc" for every
// overload of os::malloc), in --wrapper and --not-wrapper alike; and, with
// Auto, a qualified name whose last component is an allocator entry point
// or a wrapper name is a wrapper (os::malloc, os::realloc, os::strdup,
// Foo::xmalloc): a class or namespace that wraps the allocator.
func (r WrapperRule) Wraps(name string) bool {
	if r.Not[name] {
		return false
	}
	if r.Names[name] || (r.Auto && AutoWrapper(name)) || r.prefixed(name) {
		return true
	}
	// Judged for every function of a big program (node has 100k C++
	// names): the parts and the qualified name stay on the stack.
	var partsBuf [8]string
	parts := appendCxxName(partsBuf[:0], name)
	if parts == nil {
		return false
	}
	var qBuf [256]byte
	q := qBuf[:0]
	for i, p := range parts {
		if i > 0 {
			q = append(q, "::"...)
		}
		q = append(q, p...)
	}
	if r.Not[string(q)] {
		return false
	}
	if r.Names[string(q)] || hasAnyPrefix(q, r.Prefixes) {
		return true
	}
	last := parts[len(parts)-1]
	return r.Auto && len(parts) > 1 && !r.Not[last] &&
		(allocatorEntries[last] || r.Names[last] || AutoWrapper(last))
}

func (r WrapperRule) prefixed(name string) bool { return hasAnyPrefix(name, r.Prefixes) }

// hasAnyPrefix reports whether s starts with one of prefixes; for bytes,
// without a copy (Wraps' qualified name).
func hasAnyPrefix[T ~string | ~[]byte](s T, prefixes []string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && string(s[:len(p)]) == p {
			return true
		}
	}
	return false
}

// allocatorEntries are the allocating entry points whose name, as the last
// component of a qualified name, makes a wrapper (os::malloc).
var allocatorEntries = map[string]bool{
	"malloc": true, "calloc": true, "realloc": true, "reallocarray": true,
	"posix_memalign": true, "aligned_alloc": true, "memalign": true,
	"valloc": true, "pvalloc": true,
}

// cxxName returns the components of a mangled C++ function's qualified
// name ("_ZN2os6mallocEm8MEMFLAGS": os, malloc), or nil when name is not
// a mangled function name of the simple forms read here: a plain or
// nested name made of identifiers (and std::), with any local-linkage
// prefix and method qualifiers. Templates, operators, constructors and
// the rest give nil: never a wrapper by this rule.
func cxxName(name string) []string {
	return appendCxxName(nil, name)
}

// appendCxxName is cxxName appending the parts to dst (nil when name is
// not such a name).
func appendCxxName(dst []string, name string) []string {
	rest, ok := strings.CutPrefix(name, "_Z")
	if !ok {
		return nil
	}
	rest = strings.TrimPrefix(rest, "L")
	if rest == "" || rest[0] != 'N' {
		id, _ := sourceName(rest)
		if id == "" {
			return nil
		}
		return append(dst, id)
	}
	rest = strings.TrimLeft(rest[1:], "rVK") // cv-qualifiers of a method
	rest = strings.TrimLeft(rest, "RO")      // ref-qualifier
	parts := dst
	if r, ok := strings.CutPrefix(rest, "St"); ok {
		parts, rest = append(parts, "std"), r
	}
	for rest != "" && rest[0] != 'E' {
		id, r := sourceName(rest)
		if id == "" {
			return nil
		}
		parts, rest = append(parts, id), r
	}
	if rest == "" || len(parts) == len(dst) {
		return nil
	}
	return parts
}

// sourceName reads a <length><identifier> at the start of s.
func sourceName(s string) (id, rest string) {
	n := 0
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + int(s[i]-'0')
		if n > len(s) {
			return "", s
		}
	}
	if i == 0 || n == 0 || i+n > len(s) {
		return "", s
	}
	return s[i : i+n], s[i+n:]
}

// wrapperFamilies are the prefixes of allocation families (lower case,
// leading underscores dropped): redis's zmalloc, GNU's xmalloc, GLib's
// g_malloc and g_slice_alloc, nginx's ngx_alloc/ngx_palloc, FFmpeg's
// av_malloc, CPython's PyMem_/PyObject_, SQLite's
// sqlite3Malloc/sqlite3DbMallocRaw/sqlite3_malloc, OpenSSL's CRYPTO_zalloc
// (in node, among others), Perl's Perl_safesysmalloc, Ruby's ruby_xmalloc,
// Lua's luaM_malloc_, PHP's _emalloc/_safe_emalloc, APR's apr_palloc,
// libxml2's xmlMalloc/xmlStrdup/xmlMemMalloc.
var wrapperFamilies = []string{
	"z", "x", "g_", "g_slice_", "ngx_", "ngx_p", "ngx_pn", "ngx_pc", "av_", "pymem_", "pymem_raw", "pyobject_",
	"sqlite3", "sqlite3_", "sqlite3db", "sqlite3mem", "crypto_", "crypto_clear_", "perl_safesys", "ruby_x",
	"luam_", "e", "safe_e", "apr_p", "xml", "xmlmem",
}

// wrapperVerbs are what follows a family prefix (after an optional "try").
var wrapperVerbs = []string{
	"malloc", "calloc", "realloc", "alloc", "zalloc", "mallocz", "strdup", "strndup", "memdup",
}

// AutoWrapper is the automatic rule: a name is a wrapper when, lower-cased
// and without leading underscores, it is a family prefix, then optionally
// "try" (or "try_"), then an allocation verb, then anything (zmalloc_usable,
// ztrymalloc, xstrdup, g_malloc0, ngx_pnalloc, av_mallocz, PyMem_RawMalloc,
// _PyObject_Malloc, sqlite3DbMallocRaw, sqlite3_malloc64). The allocator's
// own entry points (malloc, calloc, …) have no family prefix and never match.
func AutoWrapper(name string) bool {
	n := strings.TrimLeft(name, "_")
	for _, fam := range wrapperFamilies {
		rest, ok := cutPrefixFold(n, fam)
		if !ok {
			continue
		}
		if r, ok := cutPrefixFold(rest, "try"); ok {
			rest = strings.TrimPrefix(r, "_")
		}
		for _, v := range wrapperVerbs {
			if _, ok := cutPrefixFold(rest, v); ok {
				return true
			}
		}
	}
	return false
}

// cutPrefixFold is strings.CutPrefix with s's ASCII letters lower-cased
// (prefix is lower case), without lower-casing all of s: a big program's
// table judges 180k names (strings.ToLower was a third of that).
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) {
		return s, false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return s, false
		}
	}
	return s[len(prefix):], true
}
