package report

import (
	"fmt"
	"strings"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// DefaultTop is the number of call sites per process and category that a
// report shows unless told otherwise. Options.Top's zero value means "all",
// so callers (the CLI flag) start from this.
const DefaultTop = 10

// SortKey names the figure call sites (and processes) are ranked by,
// largest first.
type SortKey string

const (
	// SortLive ranks by bytes still live: what is leaking or held now.
	SortLive SortKey = "live"
	// SortAllocated ranks by bytes allocated over the run (alloc_bytes):
	// allocation churn, live or not.
	SortAllocated SortKey = "allocated"
	// SortAllocs ranks by the number of allocation calls: hot call sites.
	SortAllocs SortKey = "allocs"
)

// sortKeys lists the valid keys in the order error messages show them.
var sortKeys = []SortKey{SortLive, SortAllocated, SortAllocs, SortRate, SortRSS, SortAnon, SortPSS, SortSwap, SortResident}

// SortKeyNames lists the valid keys (the shell completion offers them).
func SortKeyNames() []string {
	out := make([]string, len(sortKeys))
	for i, k := range sortKeys {
		out[i] = string(k)
	}
	return out
}

// ParseSortKey accepts the name of a sort key as users type it on the
// command line. The empty string means the default, SortLive.
func ParseSortKey(s string) (SortKey, error) {
	if s == "" {
		return SortLive, nil
	}
	for _, k := range sortKeys {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(sortKeys))
	for i, k := range sortKeys {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown sort key %q: valid keys are %s", s, strings.Join(names, ", "))
}

// value is the figure of st that k ranks by.
func (k SortKey) value(st aggregate.Stats) uint64 {
	switch k {
	case SortAllocated:
		return st.AllocBytes
	case SortAllocs:
		return st.Allocs
	}
	return st.LiveBytes
}

// describe says in words what k ranks by, for table titles. Mapped
// regions are "mapped" rather than "allocated", so the wording follows the
// category.
func (k SortKey) describe(c aggregate.Category) string {
	switch k {
	case SortAllocated:
		if c == aggregate.Mapped {
			return "bytes mapped"
		}
		return "bytes allocated"
	case SortAllocs:
		if c == aggregate.Mapped {
			return "mmap calls"
		}
		return "allocation calls"
	case SortRate:
		return "net bytes/s at the shortest half-life"
	}
	if k.ranksFootprint() && c == aggregate.Mapped { // hostlist.go
		return "resident bytes"
	}
	return "live bytes"
}

// Options control what a report shows. The zero value is valid: all call
// sites, sorted by live bytes, a periodic (not final) report, human units.
type Options struct {
	// Top is how many call sites to show per process and category
	// (DefaultTop is the usual choice); 0 shows all.
	Top int
	// Sort is the ranking key; "" means SortLive.
	Sort SortKey
	// Final marks the last report of the run.
	Final bool
	// Raw prints exact byte counts instead of human units (text only: JSON
	// is always exact).
	Raw bool
	// Stacks, when set, is the --detail level: sites are whole call stacks
	// and each is printed with its frames.
	Stacks StackSource
	// Leaks, when set, gives the leak check's figures, which JSON records
	// then carry (json_leaks.go).
	Leaks LeakSource
	// Host selects the whole-host layout (host.go): the top processes,
	// then the top call sites of all of them ranked together, each with
	// its process's pid and comm.
	Host bool
	// Exited says the report holds the final records of processes that
	// exited (whole host): all of them are listed, not the top ones.
	Exited bool
	// ResidentOnly: a whole-host run without --heap traced no allocator;
	// the text leaves out the empty heap tables.
	ResidentOnly bool
	// Kernel and Attach say where the figures come from, so that a bug
	// report carries them (JSON only): the kernel's release and the
	// attach path taken ("multi" or "per-probe").
	Kernel, Attach string
	// SelfMemory, when set (live runs), gives memtrace's own resident
	// memory for the report line (JSON only).
	SelfMemory SelfMemory

	// Epoch, when set, makes the report a numbered dump (epoch.go).
	Epoch *Epoch

	// sampleBytes is the snapshot's sampling mean (0: exact), set by the
	// renderers so that tables can mark estimates (estimate.go).
	sampleBytes uint64
}

// normalized checks o and fills in defaults, so renderers never see an
// invalid or empty key.
func (o Options) normalized() (Options, error) {
	if o.Top < 0 {
		return o, fmt.Errorf("invalid top %d: must be 0 (all) or more", o.Top)
	}
	k, err := ParseSortKey(string(o.Sort))
	if err != nil {
		return o, err
	}
	o.Sort = k
	return o, nil
}

// SelfMemory is memtrace's own resident memory (an interface, so that
// Options stay comparable).
type SelfMemory interface {
	// Resident returns the peak and the current resident set, in bytes.
	Resident() (peakRSS, rss uint64)
}
