package report

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/memtrace/memtrace/internal/access"
)

// Access statistics (--access, package access): per epoch, the live bytes
// touched, written, cold and never touched, per call site, per process
// and per large block. A page touched counts for every block on it: for
// blocks smaller than a page, touched is an upper bound and cold a lower
// bound.

const (
	typeAccess        = "access"
	typeAccessProcess = "access_process"
	typeAccessBlock   = "access_block"
)

// AccessNote says what the figures are worth for small blocks; every
// output that shows them carries it.
const AccessNote = "blocks smaller than a page share their pages: a touched page counts for each, so touched is an upper bound and cold a lower bound for them"

// accessFigures are the figures every access record carries.
type accessFigures struct {
	LiveBytes         uint64  `json:"live_bytes"`
	TouchedBytes      uint64  `json:"touched_bytes"`
	WrittenBytes      *uint64 `json:"written_bytes"` // null: the kernel cannot tell
	ColdBytes         uint64  `json:"cold_bytes"`
	NeverTouchedBytes uint64  `json:"never_touched_bytes"`
	LastAccessAgeNS   uint64  `json:"last_access_age_ns"`
}

// accessEpoch closes every access record: which epoch, how it was read.
type accessEpoch struct {
	Epoch   int    `json:"epoch"`
	EpochNS uint64 `json:"epoch_ns"`
	Method  string `json:"method"`
	Final   bool   `json:"final"`
	TimeNS  uint64 `json:"time_ns"`
}

// accessSite names the call site of access and access_block records.
type accessSite struct {
	Category string `json:"category"`
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Module   string `json:"module"`
	Address  string `json:"address"`
}

func newAccessSite(sym Symbolizer, pid uint32, site uint64, cat string) accessSite {
	f := resolve(sym, pid, site)
	return accessSite{Category: cat, Function: f.Function, File: f.File, Line: f.Line, Module: f.Module, Address: hex(site)}
}

// accessRecord is a call site's figures in one epoch.
type accessRecord struct {
	Type string `json:"type"`
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
	accessSite
	accessFigures
	accessEpoch
}

// accessProcessRecord is a process's figures in one epoch (the sum of
// its sites'; last_access_age_ns their largest).
type accessProcessRecord struct {
	Type string `json:"type"`
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
	accessFigures
	accessEpoch
}

// accessBlockRecord is a block of access.LargeBlock bytes or more: its
// call site as in access records, its own address and size.
type accessBlockRecord struct {
	Type string `json:"type"`
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
	accessSite
	BlockAddress string `json:"block_address"`
	SizeBytes    uint64 `json:"size_bytes"`
	accessFigures
	accessEpoch
}

func newAccessFigures(f access.Figures) accessFigures {
	r := accessFigures{LiveBytes: f.Live, TouchedBytes: f.Touched, ColdBytes: f.Cold,
		NeverTouchedBytes: f.NeverTouched, LastAccessAgeNS: f.LastAccessAgeNS}
	if f.WrittenKnown {
		r.WrittenBytes = u64(f.Written)
	}
	return r
}

// WriteAccess writes one process's epoch as NDJSON: its access_process
// record, an access record per call site, an access_block record per
// large block.
func WriteAccess(w io.Writer, pid uint32, comm string, e access.Epoch, sym Symbolizer, final bool) error {
	ep := accessEpoch{Epoch: e.Number, EpochNS: e.EndNS - min(e.StartNS, e.EndNS), Method: e.Method, Final: final, TimeNS: e.EndNS}
	records := make([]any, 0, 1+len(e.Sites)+len(e.Blocks))
	records = append(records, accessProcessRecord{Type: typeAccessProcess, PID: pid, Comm: comm,
		accessFigures: newAccessFigures(e.Process), accessEpoch: ep})
	for _, s := range e.Sites {
		records = append(records, accessRecord{Type: typeAccess, PID: pid, Comm: comm,
			accessSite:    newAccessSite(sym, pid, s.Site.Address, s.Category.String()),
			accessFigures: newAccessFigures(s.Figures), accessEpoch: ep})
	}
	for _, b := range e.Blocks {
		records = append(records, accessBlockRecord{Type: typeAccessBlock, PID: pid, Comm: comm,
			accessSite:   newAccessSite(sym, pid, b.Site.Address, b.Category.String()),
			BlockAddress: hex(b.Addr), SizeBytes: b.Live, accessFigures: newAccessFigures(b.Figures), accessEpoch: ep})
	}
	return writeRecords(w, records)
}

// WriteAccessText writes a process's "memory by access" section: its
// sites' figures in its latest epoch, the top o.Top (0: all).
func WriteAccessText(w io.Writer, pid uint32, comm string, e access.Epoch, sym Symbolizer, o Options) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nmemory by access, pid %d (%s): epoch %d (%s), read by %s\n", pid, comm, e.Number,
		time.Duration(e.EndNS-min(e.StartNS, e.EndNS)).Round(time.Millisecond), e.Method)
	fmt.Fprintf(&b, "  (%s)\n", AccessNote)
	written := func(f access.Figures) string {
		if !f.WrittenKnown {
			return "?"
		}
		return byteText(f.Written, o.Raw)
	}
	row := func(live, touched, wr, cold, never, site string) {
		fmt.Fprintf(&b, "  %10s %10s %10s %10s %14s  %s\n", live, touched, wr, cold, never, site)
	}
	row("LIVE", "TOUCHED", "WRITTEN", "COLD", "NEVER TOUCHED", "SITE")
	p := e.Process
	row(byteText(p.Live, o.Raw), byteText(p.Touched, o.Raw), written(p), byteText(p.Cold, o.Raw), byteText(p.NeverTouched, o.Raw), "(all)")
	sites := e.Sites
	if o.Top > 0 && len(sites) > o.Top {
		sites = sites[:o.Top]
	}
	for _, s := range sites {
		f := resolve(sym, pid, s.Site.Address)
		name := f.Function
		if name == "" {
			name = hex(s.Site.Address)
		}
		if f.File != "" {
			name += fmt.Sprintf(" (%s:%d)", f.File, f.Line)
		}
		if s.Category.String() != "heap" {
			name += " [" + s.Category.String() + "]"
		}
		row(byteText(s.Live, o.Raw), byteText(s.Touched, o.Raw), written(s.Figures), byteText(s.Cold, o.Raw), byteText(s.NeverTouched, o.Raw), name)
	}
	if p.Live == 0 {
		b.WriteString("  no live memory: memtrace knows the blocks allocated since it attached\n")
	}
	if !p.WrittenKnown {
		b.WriteString("  written: ? = the kernel cannot tell writes within an epoch (no soft-dirty; docs/access.md)\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}
