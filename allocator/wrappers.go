package allocator

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/memtrace/memtrace/event"
)

// DefaultWrappers are functions that allocate on their caller's behalf:
// what they allocate is charged to the code that called them. The C++
// operator new family (every variant: nothrow, aligned, arrays) and libc's
// string and line helpers.
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

// BindWrappers finds each named wrapper in the first module, in lookup
// order, that defines it (a shared library's exported symbols, or the
// executable's own), dropping aliases of one function after the first.
// Names found nowhere are skipped: most programs use few of them.
func BindWrappers(modules []Module, names []string) []Probe {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	syms := make([]map[string]symbol, len(modules))
	key := nameKey(want)
	for i, m := range modules {
		syms[i], _ = cachedFunctions(m.Path, m.Exe, want, key)
	}
	var probes []Probe
	seen := map[string]bool{}
	for _, n := range names {
		for i, m := range modules {
			sym, ok := syms[i][n]
			if !ok {
				continue
			}
			key := fmt.Sprintf("%s@%#x", m.Path, sym.offset)
			if !seen[key] {
				seen[key] = true
				probes = append(probes, Probe{Func: event.FuncWrapper, Symbol: n, Path: m.Path,
					Module: m.Module, Offset: sym.offset, Size: sym.size})
			}
			break
		}
	}
	return probes
}
