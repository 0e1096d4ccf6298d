package report

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
)

// Resident memory by who made it resident (aggregate.ResidentSnapshot):
// estimates from sampled write faults, each with its standard error.

const typeResident = "resident"

// residentRecord is one charged call site's resident anonymous memory.
type residentRecord struct {
	Type     string `json:"type"`
	PID      uint32 `json:"pid"`
	Comm     string `json:"comm"`
	Function string `json:"function"`
	// ManagedHeap names the runtime's heap that Function writes as its
	// collector or allocator ("Java heap", "V8 heap", "CLR heap"; ""
	// for none; managed_heaps.go).
	ManagedHeap string `json:"managed_heap"`
	File        string `json:"file"`
	Line        int    `json:"line"`
	Module      string `json:"module"`
	Address     string `json:"address"`
	// Python: the site is a Python frame (callsite records' "python").
	Python bool `json:"python"`
	// ResidentBytes estimates the bytes resident that the site made
	// resident; ResidentBytesStderr is its standard error.
	ResidentBytes       uint64 `json:"resident_bytes"`
	ResidentBytesStderr uint64 `json:"resident_bytes_stderr"`
	// Sampled: the figures are estimates from sampled faults (always
	// true, as in other records' "sampled"); SampledPages counts the
	// sampled pages behind them, SampleBytes is the sampling mean.
	Sampled      bool   `json:"sampled"`
	SampledPages uint64 `json:"sampled_pages"`
	SampleBytes  uint64 `json:"sample_bytes"`
	// CheckedNS is the process's latest pagemap check (0: none): the
	// figures of a process that exited are as of it.
	CheckedNS uint64 `json:"checked_ns"`
	Final     bool   `json:"final"`
	TimeNS    uint64 `json:"time_ns"`
	// Stack and StackTruncated: with --detail, as in callsite records
	// (the charged frame first).
	Stack          []stackFrame `json:"stack,omitempty"`
	StackTruncated *bool        `json:"stack_truncated,omitempty"`
}

// residentSites are the sites shown: the top o.Top (0: all).
func residentSites(r *aggregate.ResidentSnapshot, o Options) []aggregate.ResidentSite {
	if o.Top > 0 && len(r.Sites) > o.Top {
		return r.Sites[:o.Top]
	}
	return r.Sites
}

// residentRecords are p's resident records, one per shown site.
func residentRecords(p aggregate.ProcessSnapshot, sym Symbolizer, t uint64, o Options) []any {
	r := p.Resident
	if r == nil {
		return nil
	}
	var out []any
	for _, s := range residentSites(r, o) {
		out = append(out, newResidentRecord(p.PID, p.Comm, s, r, sym, t, o))
	}
	return out
}

func newResidentRecord(pid uint32, comm string, s aggregate.ResidentSite, r *aggregate.ResidentSnapshot, sym Symbolizer, t uint64, o Options) residentRecord {
	f := resolve(sym, pid, s.Address)
	rec := residentRecord{
		Type: typeResident, PID: pid, Comm: comm,
		Function: f.Function, ManagedHeap: managedHeap(f.Function), File: f.File, Line: f.Line, Module: f.Module, Address: hex(s.Address),
		Python: f.Python, ResidentBytes: s.Bytes, ResidentBytesStderr: roundStderr(s.Stderr),
		Sampled: true, SampledPages: s.Pages, SampleBytes: r.SampleBytes, CheckedNS: r.CheckedNS, Final: o.Final, TimeNS: t,
	}
	if st, ok := residentStack(pid, s, o); ok {
		rec.Stack, rec.StackTruncated = stackRecord(st)
	}
	return rec
}

// writeResidentText prints p's resident section: the total, then the top
// sites by resident bytes.
func writeResidentText(b *bytes.Buffer, p aggregate.ProcessSnapshot, sym Symbolizer, o Options) error {
	r := p.Resident
	if r == nil {
		return nil
	}
	b.WriteByte('\n')
	fmt.Fprintf(b, "  resident by who made it resident (1 write fault sampled per %s of faults): %s%s ± %s in %s\n",
		byteText(r.SampleBytes, o.Raw), estMark, byteText(r.Bytes, o.Raw), stderrText(r.Stderr, o.Raw),
		count(r.Pages, "sampled page"))
	if p.Exited {
		b.WriteString("  " + checkedText(r.CheckedNS, p.ExitTime) + "\n")
	}
	sites := residentSites(r, o)
	if len(sites) == 0 {
		return nil
	}
	var out bytes.Buffer
	t := hostTable(&out, []tw.Align{tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft, tw.AlignLeft, tw.AlignLeft})
	t.Header(estMark+"RESIDENT", "± RESIDENT", "PAGES", "FUNCTION", "FILE:LINE", "MODULE")
	var stacks [][]string
	for _, s := range sites {
		f := resolve(sym, p.PID, s.Address)
		stacks = append(stacks, residentStackLines(p.PID, s, o))
		row := []string{byteCell(s.Bytes, o.Raw), byteCell(roundStderr(s.Stderr), o.Raw),
			strconv.FormatUint(s.Pages, 10), residentFunctionLabel(f), locationLabel(f), moduleLabel(f)}
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add resident site %s: %w", hex(s.Address), err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render resident sites: %w", err)
	}
	indentTableStacks(b, out.String(), stacks)
	return nil
}

// residentStack is a resident site's checked stack with --detail (its
// first frame the charged one), ok false without.
func residentStack(pid uint32, s aggregate.ResidentSite, o Options) (callstack.Stack, bool) {
	if o.Stacks == nil || s.StackID < 0 {
		return callstack.Stack{}, false
	}
	return o.Stacks.Stack(pid, aggregate.SiteSnapshot{Address: s.Address, StackID: s.StackID}), true
}

// residentStackLines are the lines under a resident row with --detail:
// the rows of one function reached by different paths are told apart.
func residentStackLines(pid uint32, s aggregate.ResidentSite, o Options) []string {
	st, ok := residentStack(pid, s, o)
	if !ok {
		return nil
	}
	return stackLines(st)
}

// checkedText says when an exited process's figures are from: pages
// released after its last pagemap check stay charged.
func checkedText(checked, exit uint64) string {
	if checked == 0 {
		return "no pagemap check before it exited: every sampled page made resident over its run"
	}
	gap := time.Duration(exit - min(checked, exit))
	if gap < time.Millisecond { // checked at its exit stop (-p, --)
		return "figures as of the pagemap check at its exit"
	}
	ago := fmt.Sprintf("%d ms", gap.Milliseconds())
	if gap >= time.Second {
		ago = fmt.Sprintf("%.1f s", gap.Seconds())
	}
	return "figures as of its last pagemap check, " + ago + " before its exit was seen: pages released since stay charged"
}

// hostResident is one process's resident site in the host-wide ranking.
type hostResident struct {
	pid  uint32
	comm string
	aggregate.ResidentSite
}

// hostResidentView ranks the sites of all processes together by their
// resident bytes, cut to Top.
func hostResidentView(s aggregate.Snapshot, o Options) (sites []hostResident, totalSites int) {
	for _, p := range s.Processes {
		if p.Resident == nil {
			continue
		}
		for _, st := range p.Resident.Sites {
			sites = append(sites, hostResident{p.PID, p.Comm, st})
		}
	}
	slices.SortStableFunc(sites, func(a, b hostResident) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.pid, b.pid), cmp.Compare(a.Address, b.Address))
	})
	totalSites = len(sites)
	if o.Top > 0 {
		sites = sites[:min(len(sites), o.Top)]
	}
	return sites, totalSites
}

// hostResidentRecords are the resident records of a whole-host report:
// the top sites across the host.
func hostResidentRecords(s aggregate.Snapshot, sym Symbolizer, o Options) []any {
	sites, _ := hostResidentView(s, o)
	res := map[uint32]*aggregate.ResidentSnapshot{}
	for _, p := range s.Processes {
		if p.Resident != nil {
			res[p.PID] = p.Resident
		}
	}
	var out []any
	for _, st := range sites {
		out = append(out, newResidentRecord(st.pid, st.comm, st.ResidentSite, res[st.pid], sym, s.Time, o))
	}
	return out
}

// writeHostResident prints the top sites of all processes ranked together
// by who made memory resident (the processes are in the host list,
// hostlist.go).
func writeHostResident(b *bytes.Buffer, s aggregate.Snapshot, sym Symbolizer, o Options) error {
	sites, totalSites := hostResidentView(s, o)
	if totalSites == 0 {
		return nil
	}
	var out bytes.Buffer
	fmt.Fprintf(b, "\n%s\n", shownOf("call sites across the host by who made memory resident", len(sites), totalSites))
	t := hostTable(&out, []tw.Align{tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft, tw.AlignLeft, tw.AlignLeft, tw.AlignLeft})
	t.Header(estMark+"RESIDENT", "± RESIDENT", "PAGES", "PID", "COMM", "FUNCTION", "FILE:LINE", "MODULE")
	var stacks [][]string
	for _, s := range sites {
		f := resolve(sym, s.pid, s.Address)
		stacks = append(stacks, residentStackLines(s.pid, s.ResidentSite, o))
		if err := t.Append([]string{byteCell(s.Bytes, o.Raw), byteCell(roundStderr(s.Stderr), o.Raw),
			strconv.FormatUint(s.Pages, 10), strconv.FormatUint(uint64(s.pid), 10), commLabel(s.comm),
			residentFunctionLabel(f), locationLabel(f), moduleLabel(f)}); err != nil {
			return fmt.Errorf("add resident site %s: %w", hex(s.Address), err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render resident sites: %w", err)
	}
	indentTableStacks(b, out.String(), stacks)
	return nil
}
