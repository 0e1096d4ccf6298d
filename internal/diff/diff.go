// Package diff compares two memtrace reports, as HotSpot NMT's
// summary.diff does: every figure with its change, processes matched by
// command name and call sites by what names them on any machine (module
// file name, function, file, line, offset in the module), never by PID or
// absolute address.
package diff

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
)

// Figures are the counters compared.
type Figures struct {
	LiveBytes     int64 `json:"live_bytes"`
	LiveAllocs    int64 `json:"live_allocs"`
	Allocs        int64 `json:"allocs"`
	AllocBytes    int64 `json:"alloc_bytes"`
	Frees         int64 `json:"frees"`
	FreedBytes    int64 `json:"freed_bytes"`
	PeakLiveBytes int64 `json:"peak_live_bytes"`
}

func (f *Figures) add(g Figures) {
	f.LiveBytes += g.LiveBytes
	f.LiveAllocs += g.LiveAllocs
	f.Allocs += g.Allocs
	f.AllocBytes += g.AllocBytes
	f.Frees += g.Frees
	f.FreedBytes += g.FreedBytes
	f.PeakLiveBytes += g.PeakLiveBytes
}

func (f Figures) minus(g Figures) Figures {
	return Figures{f.LiveBytes - g.LiveBytes, f.LiveAllocs - g.LiveAllocs, f.Allocs - g.Allocs,
		f.AllocBytes - g.AllocBytes, f.Frees - g.Frees, f.FreedBytes - g.FreedBytes, f.PeakLiveBytes - g.PeakLiveBytes}
}

// SiteKey names a call site across runs and machines.
type SiteKey struct {
	Comm     string
	Category string
	Module   string // the module's file name, without its directory
	Function string
	File     string
	Line     int
	Offset   string
}

// Side is one report's figures, per process command name and per site.
type Side struct {
	Processes map[string]Figures
	Sites     map[SiteKey]Figures
	// AccessProcesses and AccessSites: the latest access epoch's figures
	// (access.go), empty without --access.
	AccessProcesses map[string]AccessFigures
	AccessSites     map[SiteKey]AccessFigures
}

// record holds the NDJSON fields a diff reads.
type record struct {
	Type  string `json:"type"`
	PID   uint32 `json:"pid"`
	Comm  string `json:"comm"`
	Final bool   `json:"final"`
	siteFields
	Figures
	// An access record's figures (its live bytes are Figures').
	TouchedBytes      int64 `json:"touched_bytes"`
	ColdBytes         int64 `json:"cold_bytes"`
	NeverTouchedBytes int64 `json:"never_touched_bytes"`
}

// siteFields name a call site in callsite and callsite_diff records.
type siteFields struct {
	Category string `json:"category"`
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Module   string `json:"module"`
	Offset   string `json:"offset"`
}

// ReadNDJSON reads a memtrace NDJSON output (--json, --json-file, a dump).
// It takes the final reports (all of them: a whole-host run writes one per
// batch of exits; a later record of a pid replaces an earlier one), or the
// last report when none is final.
func ReadNDJSON(r io.Reader) (Side, error) {
	type report struct {
		final bool
		procs []record
		sites []record
	}
	var reports []*report
	var acc accessNDJSON
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return Side{}, fmt.Errorf("line %d: not memtrace NDJSON: %w", n, err)
		}
		switch rec.Type {
		case "access_process", "access":
			acc.add(rec)
		case "report":
			reports = append(reports, &report{final: rec.Final})
		case "process", "callsite":
			if len(reports) == 0 {
				return Side{}, fmt.Errorf("line %d: a %s record before any report record", n, rec.Type)
			}
			cur := reports[len(reports)-1]
			if rec.Type == "process" {
				cur.procs = append(cur.procs, rec)
			} else {
				cur.sites = append(cur.sites, rec)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Side{}, err
	}
	if len(reports) == 0 {
		return Side{}, fmt.Errorf("no memtrace report in the input")
	}
	var use []*report
	for _, r := range reports {
		if r.final {
			use = append(use, r)
		}
	}
	if len(use) == 0 {
		use = reports[len(reports)-1:]
	}
	procs := map[uint32]record{}
	sites := map[uint32][]record{}
	for _, r := range use {
		for _, p := range r.procs {
			procs[p.PID] = p
			delete(sites, p.PID)
		}
		for _, s := range r.sites {
			sites[s.PID] = append(sites[s.PID], s)
		}
	}
	side := newSide()
	for pid, p := range procs {
		for _, s := range sites[pid] {
			side.addSite(p.Comm, s.siteFields, s.Figures)
		}
		side.addProcess(p.Comm, p.Figures)
	}
	acc.addTo(side)
	return side, nil
}

func newSide() Side {
	return Side{Processes: map[string]Figures{}, Sites: map[SiteKey]Figures{},
		AccessProcesses: map[string]AccessFigures{}, AccessSites: map[SiteKey]AccessFigures{}}
}

// addProcess adds a process's figures to those of its command name.
func (side Side) addProcess(comm string, g Figures) {
	f := side.Processes[comm]
	f.add(g)
	side.Processes[comm] = f
}

// addSite adds a call site's figures to those of its name on any machine
// (its module's file name, not its path).
func (side Side) addSite(comm string, s siteFields, g Figures) {
	k := SiteKey{Comm: comm, Category: s.Category, Module: filepathBase(s.Module), Function: s.Function,
		File: s.File, Line: s.Line, Offset: s.Offset}
	f := side.Sites[k]
	f.add(g)
	side.Sites[k] = f
}

// filepathBase is a module's file name ("" for none).
func filepathBase(module string) string {
	if module == "" {
		return ""
	}
	return filepath.Base(module)
}

// ProcessDiff is one command name's figures in NEW and their change.
type ProcessDiff struct {
	Comm  string
	New   Figures
	Delta Figures
}

// SiteDiff is one call site's figures in NEW and their change.
type SiteDiff struct {
	SiteKey
	New   Figures
	Delta Figures
}

// Result is a diff, each list sorted by the largest change first.
type Result struct {
	Processes []ProcessDiff
	Sites     []SiteDiff
	// AccessProcesses and AccessSites compare the access figures, where
	// either side has them (access.go).
	AccessProcesses []AccessProcessDiff
	AccessSites     []AccessSiteDiff
}

// Compare diffs new against old. Processes and sites found on one side
// only are compared with zero figures.
func Compare(old, new Side) Result {
	var res Result
	for comm := range union(old.Processes, new.Processes) {
		n := new.Processes[comm]
		res.Processes = append(res.Processes, ProcessDiff{Comm: comm, New: n, Delta: n.minus(old.Processes[comm])})
	}
	for k := range union(old.Sites, new.Sites) {
		n := new.Sites[k]
		res.Sites = append(res.Sites, SiteDiff{SiteKey: k, New: n, Delta: n.minus(old.Sites[k])})
	}
	slices.SortFunc(res.Processes, func(a, b ProcessDiff) int {
		return cmp.Or(byChange(a.Delta, b.Delta), cmp.Compare(a.Comm, b.Comm))
	})
	slices.SortFunc(res.Sites, func(a, b SiteDiff) int {
		return cmp.Or(byChange(a.Delta, b.Delta), compareKeys(a.SiteKey, b.SiteKey))
	})
	compareAccess(&res, old, new)
	return res
}

func compareKeys(a, b SiteKey) int {
	return cmp.Or(cmp.Compare(a.Comm, b.Comm), cmp.Compare(a.Category, b.Category),
		cmp.Compare(a.Module, b.Module), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Function, b.Function),
		cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
}

// byChange orders by the largest change in live bytes, then in bytes
// allocated, then in allocation calls.
func byChange(a, b Figures) int {
	return cmp.Or(cmp.Compare(abs(b.LiveBytes), abs(a.LiveBytes)), cmp.Compare(abs(b.AllocBytes), abs(a.AllocBytes)),
		cmp.Compare(abs(b.Allocs), abs(a.Allocs)))
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func union[K comparable, V any](a, b map[K]V) map[K]bool {
	out := make(map[K]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// Growth is the largest growth of a process's live bytes (0 if none grew).
func (r Result) Growth() int64 {
	var g int64
	for _, p := range r.Processes {
		g = max(g, p.Delta.LiveBytes)
	}
	return g
}
