package allocator

import (
	"bufio"
	"fmt"
	"os"
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
	Auto  bool
	Not   map[string]bool
}

// NewWrapperRule builds a rule from names to include and to exclude.
func NewWrapperRule(names []string, auto bool, not []string) WrapperRule {
	r := WrapperRule{Names: map[string]bool{}, Auto: auto, Not: map[string]bool{}}
	for _, n := range names {
		r.Names[n] = true
	}
	for _, n := range not {
		r.Not[n] = true
	}
	return r
}

// Wraps reports whether the function named name is an allocation wrapper.
func (r WrapperRule) Wraps(name string) bool {
	if r.Not[name] {
		return false
	}
	return r.Names[name] || (r.Auto && AutoWrapper(name))
}

// wrapperFamilies are the prefixes of allocation families (lower case,
// leading underscores dropped): redis's zmalloc, GNU's xmalloc, GLib's
// g_malloc, nginx's ngx_alloc/ngx_palloc, FFmpeg's av_malloc, CPython's
// PyMem_/PyObject_, SQLite's sqlite3Malloc/sqlite3DbMallocRaw/sqlite3_malloc.
var wrapperFamilies = []string{
	"z", "x", "g_", "ngx_", "ngx_p", "ngx_pn", "ngx_pc", "av_", "pymem_", "pymem_raw", "pyobject_",
	"sqlite3", "sqlite3_", "sqlite3db", "sqlite3mem",
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
	n := strings.ToLower(strings.TrimLeft(name, "_"))
	for _, fam := range wrapperFamilies {
		rest, ok := strings.CutPrefix(n, fam)
		if !ok {
			continue
		}
		if r, ok := strings.CutPrefix(rest, "try"); ok {
			rest = strings.TrimPrefix(r, "_")
		}
		for _, v := range wrapperVerbs {
			if strings.HasPrefix(rest, v) {
				return true
			}
		}
	}
	return false
}
