package aggregate

import (
	"cmp"
	"slices"
	"strconv"
)

// JVMCategoryStats is the heap one NMT category of a JVM holds: the sum of
// the figures of the heap sites whose allocations asked for it.
type JVMCategoryStats struct {
	// Name is the category's name as the JVM spells it ("Symbol",
	// "Arena Chunk", …); "" for the heap allocated without one (code that
	// called the allocator without going through os::malloc).
	Name string
	Stats
}

// SetJVMCategories names pid's JVM categories, indexed by HotSpot's
// MEMFLAGS (read from its libjvm.so): from then on its snapshots carry the
// heap by category. Events' JVMCategory is 1 + an index into names.
func (t *Table) SetJVMCategories(pid uint32, names []string) {
	t.proc(pid).jvmNames = slices.Clone(names)
}

// jvmName is the name of category c (event.JVMCategory): "" for none, and
// "#N" for a MEMFLAGS value past the names read (never expected).
func (p *process) jvmName(c uint8) string {
	switch {
	case c == 0:
		return ""
	case int(c) <= len(p.jvmNames):
		return p.jvmNames[c-1]
	}
	return "#" + strconv.Itoa(int(c)-1)
}

// jvmSummary sums the heap sites by JVM category: nil when names is (no
// JVM); otherwise every category that allocated, largest live bytes first
// (then by name), and last the heap without a category, if any.
func jvmSummary(names []string, sites []SiteSnapshot) []JVMCategoryStats {
	if names == nil {
		return nil
	}
	by := map[string]*Stats{}
	for i := range sites {
		s := &sites[i]
		if s.Category != Heap {
			continue
		}
		st := by[s.JVMCategory]
		if st == nil {
			st = &Stats{}
			by[s.JVMCategory] = st
		}
		st.Allocs += s.Allocs
		st.AllocBytes += s.AllocBytes
		st.Frees += s.Frees
		st.FreedBytes += s.FreedBytes
		st.LiveAllocs += s.LiveAllocs
		st.LiveBytes += s.LiveBytes
	}
	out := make([]JVMCategoryStats, 0, len(by))
	for name, st := range by {
		out = append(out, JVMCategoryStats{Name: name, Stats: *st})
	}
	slices.SortFunc(out, func(a, b JVMCategoryStats) int {
		if (a.Name == "") != (b.Name == "") {
			if a.Name == "" {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(b.LiveBytes, a.LiveBytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}
