package diff

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
)

// AccessFigures are access figures (--access, docs/access.md) of a
// process's latest epoch: of the process, or of one call site. Written
// bytes are left out: unknown on kernels without soft-dirty.
type AccessFigures struct {
	LiveBytes         int64 `json:"live_bytes"`
	TouchedBytes      int64 `json:"touched_bytes"`
	ColdBytes         int64 `json:"cold_bytes"`
	NeverTouchedBytes int64 `json:"never_touched_bytes"`
}

func (f *AccessFigures) add(g AccessFigures) {
	f.LiveBytes += g.LiveBytes
	f.TouchedBytes += g.TouchedBytes
	f.ColdBytes += g.ColdBytes
	f.NeverTouchedBytes += g.NeverTouchedBytes
}

func (f AccessFigures) minus(g AccessFigures) AccessFigures {
	return AccessFigures{f.LiveBytes - g.LiveBytes, f.TouchedBytes - g.TouchedBytes, f.ColdBytes - g.ColdBytes,
		f.NeverTouchedBytes - g.NeverTouchedBytes}
}

func accessFiguresOf(f access.Figures) AccessFigures {
	return AccessFigures{int64(f.Live), int64(f.Touched), int64(f.Cold), int64(f.NeverTouched)}
}

// AccessProcessDiff is one command name's access figures in NEW and their
// change.
type AccessProcessDiff struct {
	Comm  string
	New   AccessFigures
	Delta AccessFigures
}

// AccessSiteDiff is one call site's access figures in NEW and their
// change.
type AccessSiteDiff struct {
	SiteKey
	New   AccessFigures
	Delta AccessFigures
}

// AddAccess adds a process's latest access epoch (a recording replayed).
func (side Side) AddAccess(comm string, pid uint32, e access.Epoch, sym report.Symbolizer) {
	side.addAccessProcess(comm, accessFiguresOf(e.Process))
	for _, s := range e.Sites {
		n := siteNames(sym, pid, aggregate.SiteSnapshot{Address: s.Site.Address, Category: s.Category})
		side.addAccessSite(comm, n, accessFiguresOf(s.Figures))
	}
}

func (side Side) addAccessProcess(comm string, g AccessFigures) {
	f := side.AccessProcesses[comm]
	f.add(g)
	side.AccessProcesses[comm] = f
}

// addAccessSite adds a site's access figures. Access records name a site
// without its offset, so access sites are matched by module file name,
// function, file and line alone, whatever the input.
func (side Side) addAccessSite(comm string, s siteFields, g AccessFigures) {
	k := SiteKey{Comm: comm, Category: s.Category, Module: filepathBase(s.Module), Function: s.Function, File: s.File, Line: s.Line}
	f := side.AccessSites[k]
	f.add(g)
	side.AccessSites[k] = f
}

// compareAccess fills res's access lists, each by the largest change in
// cold, then touched, then never-touched bytes.
func compareAccess(res *Result, old, new Side) {
	for comm := range union(old.AccessProcesses, new.AccessProcesses) {
		n := new.AccessProcesses[comm]
		res.AccessProcesses = append(res.AccessProcesses, AccessProcessDiff{Comm: comm, New: n, Delta: n.minus(old.AccessProcesses[comm])})
	}
	for k := range union(old.AccessSites, new.AccessSites) {
		n := new.AccessSites[k]
		res.AccessSites = append(res.AccessSites, AccessSiteDiff{SiteKey: k, New: n, Delta: n.minus(old.AccessSites[k])})
	}
	slices.SortFunc(res.AccessProcesses, func(a, b AccessProcessDiff) int {
		return cmp.Or(byAccessChange(a.Delta, b.Delta), cmp.Compare(a.Comm, b.Comm))
	})
	slices.SortFunc(res.AccessSites, func(a, b AccessSiteDiff) int {
		return cmp.Or(byAccessChange(a.Delta, b.Delta), compareKeys(a.SiteKey, b.SiteKey))
	})
}

func byAccessChange(a, b AccessFigures) int {
	return cmp.Or(cmp.Compare(abs(b.ColdBytes), abs(a.ColdBytes)), cmp.Compare(abs(b.TouchedBytes), abs(a.TouchedBytes)),
		cmp.Compare(abs(b.NeverTouchedBytes), abs(a.NeverTouchedBytes)), cmp.Compare(abs(b.LiveBytes), abs(a.LiveBytes)))
}

// accessNDJSON collects a report's access records: each process's latest
// epoch (an access_process record opens each epoch's records).
type accessNDJSON struct {
	comm  map[uint32]string
	procs map[uint32]AccessFigures
	sites map[uint32][]record
}

func (a *accessNDJSON) add(rec record) {
	if a.procs == nil {
		a.comm, a.procs, a.sites = map[uint32]string{}, map[uint32]AccessFigures{}, map[uint32][]record{}
	}
	switch rec.Type {
	case "access_process":
		a.comm[rec.PID] = rec.Comm
		a.procs[rec.PID] = rec.accessFigures()
		a.sites[rec.PID] = nil
	case "access":
		if _, ok := a.procs[rec.PID]; ok {
			a.sites[rec.PID] = append(a.sites[rec.PID], rec)
		}
	}
}

func (a *accessNDJSON) addTo(side Side) {
	for pid, f := range a.procs {
		side.addAccessProcess(a.comm[pid], f)
		for _, s := range a.sites[pid] {
			side.addAccessSite(a.comm[pid], s.siteFields, s.accessFigures())
		}
	}
}

func (r record) accessFigures() AccessFigures {
	return AccessFigures{r.LiveBytes, r.TouchedBytes, r.ColdBytes, r.NeverTouchedBytes}
}

// accessProcessDiffRecord and accessDiffRecord are the NDJSON records of
// an access diff (docs/json.md).
type accessProcessDiffRecord struct {
	Type string `json:"type"`
	Comm string `json:"comm"`
	accessDeltaFields
}

type accessDiffRecord struct {
	Type string `json:"type"`
	Comm string `json:"comm"`
	siteFields
	accessDeltaFields
}

type accessDeltaFields struct {
	LiveBytes              int64 `json:"live_bytes"`
	LiveBytesDelta         int64 `json:"live_bytes_delta"`
	TouchedBytes           int64 `json:"touched_bytes"`
	TouchedBytesDelta      int64 `json:"touched_bytes_delta"`
	ColdBytes              int64 `json:"cold_bytes"`
	ColdBytesDelta         int64 `json:"cold_bytes_delta"`
	NeverTouchedBytes      int64 `json:"never_touched_bytes"`
	NeverTouchedBytesDelta int64 `json:"never_touched_bytes_delta"`
}

func newAccessDeltaFields(n, d AccessFigures) accessDeltaFields {
	return accessDeltaFields{n.LiveBytes, d.LiveBytes, n.TouchedBytes, d.TouchedBytes, n.ColdBytes, d.ColdBytes,
		n.NeverTouchedBytes, d.NeverTouchedBytes}
}

// accessRecords are r's access NDJSON records: access_process_diff, then
// access_diff, each by the largest change.
func (r Result) accessRecords() []any {
	var out []any
	for _, p := range r.AccessProcesses {
		out = append(out, accessProcessDiffRecord{"access_process_diff", p.Comm, newAccessDeltaFields(p.New, p.Delta)})
	}
	for _, s := range r.AccessSites {
		out = append(out, accessDiffRecord{"access_diff", s.Comm, siteFields{Category: s.Category, Function: s.Function,
			File: s.File, Line: s.Line, Module: s.Module}, newAccessDeltaFields(s.New, s.Delta)})
	}
	return out
}

// writeAccessText writes comm's access figures and the sites whose
// figures changed, after its heap figures.
func writeAccessText(b *bytes.Buffer, r Result, comm string, raw bool) {
	i := slices.IndexFunc(r.AccessProcesses, func(p AccessProcessDiff) bool { return p.Comm == comm })
	if i < 0 {
		return
	}
	n, d := r.AccessProcesses[i].New, r.AccessProcesses[i].Delta
	fmt.Fprintf(b, "  access:    live %s, touched %s, cold %s, never touched %s (latest epochs)\n", fig(n.LiveBytes, d.LiveBytes, raw, true),
		fig(n.TouchedBytes, d.TouchedBytes, raw, true), fig(n.ColdBytes, d.ColdBytes, raw, true), fig(n.NeverTouchedBytes, d.NeverTouchedBytes, raw, true))
	first := true
	for _, s := range r.AccessSites {
		if s.Comm != comm || s.Delta == (AccessFigures{}) {
			continue
		}
		if first {
			b.WriteString("  call sites by access change:\n")
			first = false
		}
		fmt.Fprintf(b, "    cold %s, touched %s, never touched %s, live %s  %s\n", fig(s.New.ColdBytes, s.Delta.ColdBytes, raw, true),
			fig(s.New.TouchedBytes, s.Delta.TouchedBytes, raw, true), fig(s.New.NeverTouchedBytes, s.Delta.NeverTouchedBytes, raw, true),
			fig(s.New.LiveBytes, s.Delta.LiveBytes, raw, true), s.label())
	}
}
