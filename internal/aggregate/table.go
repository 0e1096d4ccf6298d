package aggregate

import (
	"github.com/memtrace/memtrace/internal/event"
)

// Table turns an event stream into per-process, per-call-site statistics.
// It is a pure function of the events applied (plus the lost counts and
// exits it is told about), so live and replayed runs give the same tables.
//
// A Table is not safe for concurrent use: one goroutine feeds it, and
// reports are built from Snapshot, never from the Table itself.
type Table struct {
	procs map[uint32]*process
	// last is the process of the previous event: events come in runs from
	// one process, so this saves most map lookups on the hot path.
	last *process

	started bool
	epoch   uint64 // Time of the first event; live blocks store ms since it
	newest  uint64 // newest event Time seen

	totalLost uint64

	rates *rateTable // decaying rates (table_rates.go); nil until SetHalfLives

	sampleBytes uint64 // sampled mode's mean (estimate.go); 0 = exact
	breakdown   bool   // sites are call sites, stacks a breakdown (stack_parts.go)

	obs Observer // sees every input (observer.go); nil: none
	// uncharged hears of each sampled page that leaves a process's
	// resident pages, moved of each that moves (resident.go); nil: none.
	uncharged func(pid uint32, addr uint64)
	moved     func(pid uint32, from, to uint64)
	marks     []Mark        // marks.go
	peakTol   PeakTolerance // the peak snapshot's T (peak.go)
}

// NewTable returns an empty Table.
func NewTable() *Table {
	return &Table{procs: make(map[uint32]*process), peakTol: DefaultPeakTolerance}
}

// proc returns pid's process, creating it if new.
func (t *Table) proc(pid uint32) *process {
	if p := t.last; p != nil && p.pid == pid {
		return p
	}
	p := t.procs[pid]
	if p == nil {
		p = newProcess(pid)
		t.initEstimate(p)
		t.initParts(p)
		t.procs[pid] = p
	}
	t.last = p
	return p
}

// AddProcess registers a target so that it is reported even before (or
// without) any event. Calling it again only updates comm, if non-empty.
func (t *Table) AddProcess(pid uint32, comm string) {
	if t.obs != nil {
		t.obs.Process(pid, comm)
	}
	p := t.proc(pid)
	if comm != "" {
		p.comm = comm
	}
}

// Apply accounts for one event. Events of a PID never registered are
// applied too, to a process with an empty comm. It does not allocate once
// the tables have grown to the workload.
func (t *Table) Apply(e *event.Event) {
	if t.obs != nil {
		t.obs.Event(e)
	}
	if !t.started {
		t.started, t.epoch = true, e.Time
	}
	if e.Time > t.newest {
		t.newest = e.Time
	}
	p := t.proc(e.PID)
	p.leaf = e.Leaf
	switch e.Kind {
	case event.Alloc:
		if e.Func == event.FuncPyPool {
			p.poolSize = e.Size
		}
		p.alloc(e.Addr, e.Size, heapSite(e), t.blockMS(e))
		t.checkPeak(p, e.Time)
	case event.Free:
		p.free(e.Addr)
	case event.Realloc:
		p.realloc(e.OldAddr, e.Addr, e.Size, heapSite(e), t.blockMS(e))
		t.checkPeak(p, e.Time)
	case event.Mmap:
		p.mmap(e.Addr, e.Size, t.mappedSite(e))
	case event.Munmap:
		if e.Size != 0 {
			p.munmap(e.Addr, rangeEnd(e.Addr, e.Size))
			p.unmapPools(e.Addr, rangeEnd(e.Addr, e.Size))
		}
	case event.Mremap:
		p.mremap(e.OldAddr, e.OldSize, e.Addr, e.Size)
		t.moveResident(p, e.OldAddr, e.OldSize, e.Addr)
	case event.Fault:
		t.uncharge(p, e.Addr, faultSpan(e.Size)) // made resident again: older samples there are gone
		if folio := restFolio(e.Size); folio != 0 {
			// Before 6.2, a huge page's rest: the huge page is new, so
			// older large samples of its range are gone whole (its own
			// first page's sample, just made, is no large one).
			t.dropSpans(p, e.Addr&^(folio-1), folio)
		}
		p.resident.fault(e.Addr, e.Size, e.OldSize, siteID{addr: e.CallSite, stack: e.StackID})
	case event.Unresident:
		if e.Size != 0 {
			p.resident.shrink(e.Addr, e.Size) // a fault larger than a page, resident in part
		} else {
			t.drop(p, e.Addr) // Addr 0: a check that found every page resident
		}
		p.resident.checked = e.Time
	case event.Refault:
		t.uncharge(p, e.Addr, e.Size)
	case event.Moved:
		t.moveResident(p, e.OldAddr, e.OldSize, e.Addr)
	}
	if e.NoTable {
		t.markNoTable(p, e)
	}
}

// markNoTable marks the site an event was just charged to as charged
// before its unwind table was in (rare: only at a program's start).
func (t *Table) markNoTable(p *process, e *event.Event) {
	idx, key := p.heapSites, siteID{e.CallSite, e.StackID, e.JVMCategory}
	switch e.Kind {
	case event.Alloc, event.Realloc:
		if p.parts != nil {
			key.stack = -1 // as alloc keys it
		}
	case event.Mmap:
		idx, key = p.mappedSites, t.mappedSite(e)
	default:
		return
	}
	if i, ok := idx[key]; ok {
		p.sites[i].noTable = true
	}
}

// mappedSite is a mapping's site: with the stack breakdown, its call site
// alone (mappings are not broken down).
// heapSite is the site an allocation or realloc event is charged to.
func heapSite(e *event.Event) siteID {
	return siteID{e.CallSite, e.StackID, e.JVMCategory}
}

func (t *Table) mappedSite(e *event.Event) siteID {
	if t.breakdown {
		return siteID{addr: e.CallSite, stack: -1}
	}
	return siteID{addr: e.CallSite, stack: e.StackID}
}

// ms converts an event time to the milliseconds since the first event that
// live blocks store (4 bytes instead of 8, less the top bit, pyBlock:
// enough for 24 days). Events that arrive out of order from before the
// first one count as 0.
func (t *Table) ms(ns uint64) uint32 {
	if ns <= t.epoch {
		return 0
	}
	return uint32(min((ns-t.epoch)/1e6, pyBlock-1))
}

// pyBlock marks, in a live block's ms, a pymalloc block
// (event.Func.Python): the leak check does not judge those
// (PythonBlocks). A site (a Python line) may make both kinds.
const pyBlock = 1 << 31

// blockMS is the ms a live block made by e stores, with pyBlock.
func (t *Table) blockMS(e *event.Event) uint32 {
	ms := t.ms(e.Time)
	if e.Func.Python() {
		ms |= pyBlock
	}
	return ms
}

// SetLost records the absolute number of pid's events the kernel dropped.
func (t *Table) SetLost(pid uint32, n uint64) {
	if t.obs != nil {
		t.obs.Lost(pid, n)
	}
	t.proc(pid).lost = n
}

// SetTotalLost records the run's total of dropped events.
func (t *Table) SetTotalLost(n uint64) {
	if t.obs != nil {
		t.obs.TotalLost(n)
	}
	t.totalLost = n
}

// MarkExited records that pid exited at when (kernel monotonic ns). Its
// statistics stay until Forget. An unknown pid is ignored: in whole-host
// runs every exit on the host is reported, and a process that never
// allocated has nothing to show.
func (t *Table) MarkExited(pid uint32, when uint64) {
	if t.obs != nil {
		t.obs.Exited(pid, when)
	}
	if p := t.procs[pid]; p != nil {
		p.exited, p.exitTime = true, when
		t.newest = max(t.newest, when) // an exit is an event: reports are as of it
	}
}

// Newest is the time of the newest event applied (kernel monotonic ns).
func (t *Table) Newest() uint64 { return t.newest }

// Forget drops everything about pid. Its marks stay in the list, which
// dumps index by position, but under PID 0 (no process), so that a new
// process given the same PID is not shown them.
func (t *Table) Forget(pid uint32) {
	if t.obs != nil {
		t.obs.Forgot(pid)
	}
	if t.last != nil && t.last.pid == pid {
		t.last = nil
	}
	if p := t.procs[pid]; p != nil && p.marks > 0 {
		for i := range t.marks {
			if t.marks[i].PID == pid {
				t.marks[i].PID = 0
			}
		}
	}
	if p := t.procs[pid]; p != nil && t.uncharged != nil {
		for a := range p.resident.pages {
			t.uncharged(pid, p.resident.origin(a))
		}
	}
	delete(t.procs, pid)
}

// LiveBlock returns the size and allocating call site of the live heap
// block at addr.
func (t *Table) LiveBlock(pid uint32, addr uint64) (size, site uint64, ok bool) {
	p := t.procs[pid]
	if p == nil {
		return 0, 0, false
	}
	b, ok := p.live.get(addr)
	if !ok {
		return 0, 0, false
	}
	return b.size, p.sites[b.site].addr, true
}

// LiveBlockTime returns when the live heap block at addr was allocated, in
// kernel monotonic ns, to millisecond precision.
func (t *Table) LiveBlockTime(pid uint32, addr uint64) (ns uint64, ok bool) {
	p := t.procs[pid]
	if p == nil {
		return 0, false
	}
	b, ok := p.live.get(addr)
	if !ok {
		return 0, false
	}
	return t.epoch + uint64(b.ms&^pyBlock)*1e6, true
}

// ForEachLive calls fn for each of pid's live heap blocks, in no particular
// order, until fn returns false. fn must not change the Table.
func (t *Table) ForEachLive(pid uint32, fn func(addr, size, site uint64) bool) {
	p := t.procs[pid]
	if p == nil {
		return
	}
	p.live.each(func(addr uint64, b liveBlock) bool {
		return fn(addr, b.size, p.sites[b.site].addr)
	})
}
