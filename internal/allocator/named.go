package allocator

import (
	"fmt"

	"github.com/memtrace/memtrace/internal/event"
)

// BindNamed finds each named function in the first module, in lookup
// order, that defines it (a shared library's exported symbols, or the
// executable's own), dropping aliases of one function after the first.
// Names found nowhere are skipped. The probes' Func is left for the
// caller to set (--mark).
func BindNamed(modules []Module, names []string) []Probe {
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
				probes = append(probes, Probe{Symbol: n, Path: m.Path,
					Module: m.Module, Offset: sym.offset, Size: sym.size})
			}
			break
		}
	}
	return probes
}

// BindMarks binds the --mark functions in modules: each probe's Func is
// event.FuncMark plus the function's index among names (its attach
// cookie). missing lists the names found in no module.
func BindMarks(modules []Module, names []string) (probes []Probe, missing []string) {
	if len(names) == 0 {
		return nil, nil
	}
	probes = BindNamed(modules, names)
	found := map[string]bool{}
	for i := range probes {
		found[probes[i].Symbol] = true
		for j, name := range names {
			if name == probes[i].Symbol {
				probes[i].Func = event.FuncMark + event.Func(j)
			}
		}
	}
	for _, name := range names {
		if !found[name] {
			missing = append(missing, name)
		}
	}
	return probes, missing
}
