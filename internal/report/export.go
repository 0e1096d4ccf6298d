package report

import (
	"slices"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// This file exports what the live view (package watch) shares with the
// reports, so that both rank and label call sites the same way.

// SortKeys returns the sort keys the live view cycles through for its
// allocator panels, in order: all but the footprint keys, which rank
// processes by what those panels do not show.
func SortKeys() []SortKey {
	return slices.DeleteFunc(slices.Clone(sortKeys), SortKey.ranksFootprint)
}

// TopSites returns the sites of category c ranked by k, largest first, cut
// to top (0 = all), as a report ranks them. sites is not modified.
func TopSites(sites []aggregate.SiteSnapshot, c aggregate.Category, k SortKey, top int) []aggregate.SiteSnapshot {
	var out []aggregate.SiteSnapshot
	for _, s := range sites {
		if s.Category == c {
			out = append(out, s)
		}
	}
	return topSites(out, Options{Sort: k, Top: top})
}

// RankProcesses returns procs ordered by k as a report orders them.
func RankProcesses(procs []aggregate.ProcessSnapshot, k SortKey) []aggregate.ProcessSnapshot {
	out := slices.Clone(procs)
	slices.SortStableFunc(out, func(a, b aggregate.ProcessSnapshot) int {
		if c := k.compareProcesses(a, b); c != 0 {
			return c
		}
		if a.PID < b.PID {
			return -1
		}
		if a.PID > b.PID {
			return 1
		}
		return 0
	})
	return out
}

// SiteLabels resolves a call site and returns the function, location and
// module columns as the text report prints them.
func SiteLabels(sym Symbolizer, pid uint32, addr uint64) (function, location, module string) {
	f := resolve(sym, pid, addr)
	return functionLabel(f), locationLabel(f), moduleLabel(f)
}

// HumanBytes formats n in binary units ("1.5 MiB"), as reports do.
func HumanBytes(n uint64) string { return humanBytes(n) }

// RateBytes formats a signed bytes-per-second figure in binary units
// ("-1.5 MiB"), without the "/s".
func RateBytes(v float64) string { return rateBytes(v, false) }

// HalfLifeText formats a half-life as the flags take it ("1s", "500ms").
func HalfLifeText(d time.Duration) string { return halfLifeText(d) }

// Describe says in words what k ranks heap call sites by.
func (k SortKey) Describe() string { return k.describe(aggregate.Heap) }
