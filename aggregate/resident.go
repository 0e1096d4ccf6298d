package aggregate

import (
	"cmp"
	"iter"
	"math"
	"slices"
)

// Resident attribution: who made anonymous memory resident. The probes
// sample faults by the bytes they make resident: a fault of size bytes (a
// page, or a huge page's folio) with probability P = 1 - e^(-size/N) (one
// sample per N bytes on average; a Fault event carries N in OldSize and
// size in Size), and say who took the fault. A sampled page stays charged
// while it stays resident; an Unresident event (user space found it gone
// from /proc/PID/pagemap) ends that. The resident bytes charged to a site
// are then the Horvitz-Thompson estimate sum(size/P) over its sampled
// pages still resident, unbiased whatever the sizes, with variance
// sum(size^2 (1-P)/P^2), whose estimate gives the standard error.

// residentPage is a sampled page still charged.
type residentPage struct {
	site siteID
	// size: the bytes the sampled fault made resident, a multiple of a
	// page; its low bit is restSecond.
	size uint32
	// resident: of them, the bytes still resident, size until a check of a
	// fault larger than a page finds fewer (a huge page released in part).
	resident uint32
}

// residentPages are a process's sampled pages, by address.
type residentPages struct {
	pages   map[uint64]residentPage
	mean    uint64 // N of the latest Fault
	checked uint64 // time of the latest Unresident: the latest pagemap check
}

func (r *residentPages) fault(addr, size, mean uint64, site siteID) {
	if r.pages == nil {
		r.pages = map[uint64]residentPage{}
	}
	sz := uint32(min(size, math.MaxUint32))
	pg := residentPage{site: site, size: sz, resident: sz}
	if folio := size + pageSize; size > pageSize && size&(size-1) != 0 && folio&(folio-1) == 0 && addr&(folio-1) == pageSize {
		pg.size |= restSecond
	}
	r.pages[addr] = pg
	r.mean = mean
}

// restSecond marks in residentPage.size a sample, before 6.2, of a huge
// page's rest keyed at the folio's second page (its first was the fault's
// own, sampled apart). Told by the address's alignment at the fault, and
// kept: a move (mremap) need not keep that alignment.
const restSecond = 1

// bytes is the size of the sampled fault.
func (pg residentPage) bytes() uint64 { return uint64(pg.size &^ restSecond) }

// shrink: of the sample at addr, only bytes are still resident (an
// Unresident event with a size). The sample is weighed by its fault's
// chance still, so the estimate of what stays stays unbiased.
func (r *residentPages) shrink(addr, bytes uint64) {
	if pg, ok := r.pages[addr]; ok && bytes < uint64(pg.resident) {
		pg.resident = uint32(bytes)
		r.pages[addr] = pg
	}
}

// in yields the sampled pages in [addr, addr+size) (a page at least): by
// address, or, for a range with more pages than are sampled, through the
// pages sampled, in no order. The caller may delete the page yielded.
func (r *residentPages) in(addr, size uint64) iter.Seq[uint64] {
	size = max(size, pageSize)
	return func(yield func(uint64) bool) {
		if len(r.pages) == 0 {
			return
		}
		if size/pageSize > uint64(len(r.pages)) {
			for a := range r.pages {
				if a-addr < size && !yield(a) {
					return
				}
			}
			return
		}
		for a := addr; a-addr < size; a += pageSize {
			if _, ok := r.pages[a]; ok && !yield(a) {
				return
			}
		}
	}
}

// uncharge drops p's sampled pages in [addr, addr+size), telling
// t.uncharged of each.
func (t *Table) uncharge(p *process, addr, size uint64) {
	for a := range p.resident.in(addr, size) {
		delete(p.resident.pages, a)
		if t.uncharged != nil {
			t.uncharged(p.pid, a)
		}
	}
}

// faultSpan is the range a sampled fault of size bytes made resident
// anew, from its address: a page or a folio (a power of two); before 6.2
// a huge page's rest, sampled apart from its first 4 KiB (2 MiB - 4 KiB
// from the folio's first page or its second), spans its own page only, as
// the fault's first 4 KiB, sampled before it, may lie in that range.
func faultSpan(size uint64) uint64 {
	if size&(size-1) == 0 {
		return size
	}
	return pageSize
}

// moveResident moves p's sampled pages in [from, from+size) to the same
// offsets from to: mremap moves a mapping's pages, resident ones
// included, and they stay charged to who made them resident. A sampled
// page already at a destination (stale: that range was not mapped) is
// replaced.
func (t *Table) moveResident(p *process, from, size, to uint64) {
	if from == to || size == 0 {
		return
	}
	moving := slices.Collect(p.resident.in(from, size))
	pages := make([]residentPage, len(moving))
	for i, a := range moving {
		pages[i] = p.resident.pages[a]
		delete(p.resident.pages, a)
	}
	for i, a := range moving {
		dst := a - from + to
		t.uncharge(p, dst, pageSize)
		p.resident.pages[dst] = pages[i]
		if t.moved != nil {
			t.moved(p.pid, a, dst)
		}
	}
}

// OnMove has f hear of each sampled page that moves (an Mremap, a Moved),
// from its old address to its new one: the live run moves the probes'
// count of charged pages with it (tracer.Objects.MovePage).
func (t *Table) OnMove(f func(pid uint32, from, to uint64)) { t.moved = f }

// OnUncharge has f hear of each sampled page that leaves a process's
// pages still charged (an Unresident, a Refault, a new sample at its
// address, Forget), with its process and address: the live run keeps the
// probes' count of charged pages (tracer.Objects.Uncharge).
func (t *Table) OnUncharge(f func(pid uint32, addr uint64)) { t.uncharged = f }

// Charged reports whether pid has a sampled page charged in [addr,
// addr+size): a Refault elsewhere changes nothing, and is not applied.
func (t *Table) Charged(pid uint32, addr, size uint64) bool {
	p := t.procs[pid]
	if p == nil {
		return false
	}
	for range p.resident.in(addr, size) {
		return true
	}
	return false
}

// ResidentSnapshot is a process's resident anonymous memory by who made it
// resident, estimated from sampled faults.
type ResidentSnapshot struct {
	// SampleBytes is N: one sampled fault per N bytes of write faults on average.
	SampleBytes uint64
	// CheckedNS is when the pages were last checked against pagemap (the
	// latest Unresident event; 0: never). A process gone has its figures
	// as of that check.
	CheckedNS uint64
	// Pages counts the sampled pages still resident.
	Pages uint64
	// Bytes estimates the resident bytes they stand for; Stderr is its standard error.
	Bytes  uint64
	Stderr float64
	// Sites, most resident bytes first (then by address).
	Sites []ResidentSite
}

// ResidentSite is one call site's share of the resident memory.
type ResidentSite struct {
	// Address is the charged frame: the first outside libc's memory
	// functions and the allocator (the faulting instruction itself when
	// it is the first).
	Address uint64
	// StackID names its stack (--detail); -1 when none.
	StackID int32
	Pages   uint64
	Bytes   uint64
	Stderr  float64
}

// FaultProbability is the chance that the probes sample a fault that made
// pageBytes resident when one in mean bytes is sampled on average.
func FaultProbability(pageBytes, mean uint64) float64 {
	if mean == 0 {
		return 1
	}
	return -math.Expm1(-float64(pageBytes) / float64(mean))
}

func (r *residentPages) snapshot() *ResidentSnapshot {
	if r.mean == 0 {
		return nil
	}
	s := &ResidentSnapshot{SampleBytes: r.mean, CheckedNS: r.checked}
	type acc struct{ pages, bytes, variance float64 }
	by := map[siteID]*acc{}
	var total acc
	prob := map[uint32]float64{} // by size: a page, a huge page
	for _, pg := range r.pages {
		a := by[pg.site]
		if a == nil {
			a = &acc{}
			by[pg.site] = a
		}
		p, ok := prob[pg.size]
		if !ok {
			p = FaultProbability(pg.bytes(), r.mean)
			prob[pg.size] = p
		}
		size := float64(pg.resident)
		for _, a := range [2]*acc{a, &total} {
			a.pages++
			a.bytes += size / p
			a.variance += size * size * (1 - p) / (p * p)
		}
	}
	for id, a := range by {
		s.Sites = append(s.Sites, ResidentSite{Address: id.addr, StackID: id.stack, Pages: uint64(a.pages),
			Bytes: uint64(math.Round(a.bytes)), Stderr: math.Sqrt(a.variance)})
	}
	s.Pages = uint64(total.pages)
	s.Bytes = uint64(math.Round(total.bytes))
	s.Stderr = math.Sqrt(total.variance)
	slices.SortFunc(s.Sites, func(a, b ResidentSite) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.StackID, b.StackID))
	})
	return s
}

// ResidentPages returns the addresses of pid's sampled pages still
// charged, in increasing order: the pages user space checks in pagemap.
// A sampled fault larger than a page is one of ResidentSpans instead.
func (t *Table) ResidentPages(pid uint32) []uint64 {
	p := t.procs[pid]
	if p == nil || len(p.resident.pages) == 0 {
		return nil
	}
	out := make([]uint64, 0, len(p.resident.pages))
	for a, pg := range p.resident.pages {
		if _, ok := sampledSpan(a, pg); !ok {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// SampledSpan is a sampled fault larger than a page (a huge page, an
// mTHP folio, or before 6.2 a huge page's rest): Size bytes made resident
// at once, of which Resident are still charged; the pages of [Start, End),
// less the page at Skip if not 0, are the fault's. Addr is the sample's.
type SampledSpan struct {
	Addr, Size, Resident uint64
	Start, End, Skip     uint64
}

// sampledSpan is the span of the sample pg at addr, if it is larger than
// a page. A folio is keyed at its first page; before 6.2 a huge page's
// rest (size = folio - a page) is keyed at the folio's first page, or at
// its second when the first is the fault's own page (sampled apart,
// restSecond): that one is skipped.
func sampledSpan(addr uint64, pg residentPage) (SampledSpan, bool) {
	size := pg.bytes()
	s := SampledSpan{Addr: addr, Size: size}
	switch folio := size + pageSize; {
	case size <= pageSize:
		return s, false
	case size&(size-1) == 0:
		s.Start, s.End = addr, addr+size
	case folio&(folio-1) == 0:
		s.Start = addr
		if pg.size&restSecond != 0 {
			s.Start, s.Skip = addr-pageSize, addr-pageSize
		}
		s.End = s.Start + folio
	default:
		return s, false
	}
	return s, true
}

// ResidentSpans returns pid's sampled faults larger than a page, by
// address: user space counts their pages still resident in pagemap, and
// an Unresident event with the bytes left shrinks each (the Table's Apply).
func (t *Table) ResidentSpans(pid uint32) []SampledSpan {
	p := t.procs[pid]
	if p == nil {
		return nil
	}
	var out []SampledSpan
	for a, pg := range p.resident.pages {
		if s, ok := sampledSpan(a, pg); ok {
			s.Resident = uint64(pg.resident)
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b SampledSpan) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// ResidentPIDs returns the processes with sampled pages still charged.
func (t *Table) ResidentPIDs() []uint32 {
	var out []uint32
	for pid, p := range t.procs {
		if len(p.resident.pages) > 0 {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}
