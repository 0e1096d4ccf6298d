package aggregate

import (
	"cmp"
	"iter"
	"math"
	"math/bits"
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

// residentPage is a sampled fault still charged.
type residentPage struct {
	site siteID
	// size: the bytes the sampled fault made resident, a multiple of a page.
	size uint32
	// resident: of them, the bytes still resident, size until a check of a
	// fault larger than a page finds fewer (a huge page released in part).
	resident uint32
}

// residentSpan is what a sampled fault larger than a page (a huge page,
// an mTHP folio, before 6.2 a huge page's rest) adds to its residentPage:
// the pages it made resident, less those that are no longer its.
type residentSpan struct {
	key        uint64 // its address in residentPages.pages
	start, end uint64 // the fault's pages: [start, end)
	// origin is the address the probes charged (the fault's report): the
	// refault slot that OnUncharge and OnMove name, whatever key it has now.
	origin uint64
	// holes: a bit per page from start, set for pages no longer the
	// sample's: written again after a release (a refault, a new sample
	// there), or (before 6.2) the fault's own page, sampled apart.
	holes []uint64
}

// residentPages are a process's sampled faults, by address.
type residentPages struct {
	// pages holds every sample: a fault's page, or a larger fault's key
	// (its first page that is still its).
	pages map[uint64]residentPage
	// spans: the samples larger than a page, by key, and by the 2 MiB
	// regions they overlap (one, or two after a move off the alignment).
	spans   map[uint64]*residentSpan
	regions map[uint64][]*residentSpan
	mean    uint64 // N of the latest Fault
	checked uint64 // time of the latest Unresident: the latest pagemap check
}

const regionShift = 21

func (r *residentPages) fault(addr, size, mean uint64, site siteID) {
	if r.pages == nil {
		r.pages = map[uint64]residentPage{}
	}
	sz := uint32(min(size, math.MaxUint32))
	r.pages[addr] = residentPage{site: site, size: sz, resident: sz}
	r.mean = mean
	switch folio := restFolio(size); {
	case size <= pageSize:
	case size&(size-1) == 0:
		r.addSpan(&residentSpan{key: addr, origin: addr, start: addr, end: addr + size})
	case folio != 0:
		// Before 6.2, a huge page's rest (the folio less the fault's own
		// page, sampled apart): keyed at the folio's first page, or at its
		// second when the first is the fault's own, which is no part of it.
		sp := &residentSpan{key: addr, origin: addr, start: addr, end: addr + folio}
		if addr&(folio-1) == pageSize {
			sp.start, sp.end = addr-pageSize, addr-pageSize+folio
			sp.punch(sp.start, pageSize)
		}
		r.addSpan(sp)
	}
}

// restFolio is the folio of a sampled fault of size bytes that is, before
// 6.2, a huge page's rest (the folio less its first 4 KiB); 0 for others.
func restFolio(size uint64) uint64 {
	if folio := size + pageSize; size > pageSize && size&(size-1) != 0 && folio&(folio-1) == 0 {
		return folio
	}
	return 0
}

// origin is the address the probes charged for the sample at key.
func (r *residentPages) origin(key uint64) uint64 {
	if sp := r.spans[key]; sp != nil {
		return sp.origin
	}
	return key
}

func (r *residentPages) addSpan(sp *residentSpan) {
	if r.spans == nil {
		r.spans, r.regions = map[uint64]*residentSpan{}, map[uint64][]*residentSpan{}
	}
	r.spans[sp.key] = sp
	for g := sp.start >> regionShift; g <= (sp.end-1)>>regionShift; g++ {
		r.regions[g] = append(r.regions[g], sp)
	}
}

func (r *residentPages) removeSpan(sp *residentSpan) {
	delete(r.spans, sp.key)
	for g := sp.start >> regionShift; g <= (sp.end-1)>>regionShift; g++ {
		rs := slices.DeleteFunc(r.regions[g], func(s *residentSpan) bool { return s == sp })
		if len(rs) == 0 {
			delete(r.regions, g)
		} else {
			r.regions[g] = rs
		}
	}
}

// overlapping returns the spans with a page in [addr, addr+size).
func (r *residentPages) overlapping(addr, size uint64) []*residentSpan {
	if len(r.spans) == 0 {
		return nil
	}
	var out []*residentSpan
	for g := addr >> regionShift; g <= (addr+size-1)>>regionShift; g++ {
		for _, sp := range r.regions[g] {
			if sp.start < addr+size && addr < sp.end && !slices.Contains(out, sp) {
				out = append(out, sp)
			}
		}
	}
	return out
}

// pages is the number of pages of the span.
func (sp *residentSpan) pages() uint64 { return (sp.end - sp.start) / pageSize }

func (sp *residentSpan) hole(addr uint64) bool {
	i := (addr - sp.start) / pageSize
	return sp.holes != nil && sp.holes[i/64]&(1<<(i%64)) != 0
}

// punch makes the span's pages in [addr, addr+size) holes, and returns
// the pages left to it.
func (sp *residentSpan) punch(addr, size uint64) uint64 {
	n := sp.pages()
	if sp.holes == nil {
		sp.holes = make([]uint64, (n+63)/64)
	}
	for a := max(addr, sp.start); a < min(addr+size, sp.end); a += pageSize {
		i := (a - sp.start) / pageSize
		sp.holes[i/64] |= 1 << (i % 64)
	}
	left := n
	for _, w := range sp.holes {
		left -= uint64(bits.OnesCount64(w))
	}
	return left
}

// holeAddrs returns the addresses of the span's pages that are no longer its.
func (sp *residentSpan) holeAddrs() []uint64 {
	var out []uint64
	for a := sp.start; a < sp.end; a += pageSize {
		if sp.hole(a) {
			out = append(out, a)
		}
	}
	return out
}

// shrink: of the sample at addr, only bytes are still resident (an
// Unresident event with a size). The sample is weighed by its fault's
// chance still, so the estimate of what stays stays unbiased.
func (r *residentPages) shrink(addr, bytes uint64) {
	if pg, ok := r.pages[addr]; ok && bytes < uint64(pg.resident) {
		pg.resident = uint32(bytes)
		r.pages[addr] = pg
	}
}

// in yields the samples keyed in [addr, addr+size) (a page at least): by
// address, or, for a range with more pages than are sampled, through the
// samples, in no order. The caller may delete the sample yielded.
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

// drop removes p's sample at addr, telling t.uncharged.
func (t *Table) drop(p *process, addr uint64) {
	if _, ok := p.resident.pages[addr]; !ok {
		return
	}
	origin := p.resident.origin(addr)
	delete(p.resident.pages, addr)
	if sp := p.resident.spans[addr]; sp != nil {
		p.resident.removeSpan(sp)
	}
	if t.uncharged != nil {
		t.uncharged(p.pid, origin)
	}
}

// uncharge: p's pages in [addr, addr+size) are no longer its older
// samples' (made resident again). Samples within the range are dropped;
// a larger fault's sample that the range covers in part keeps the rest of
// its pages, charged for no more than they hold, and takes as its key its
// first page left when its key is in the range.
func (t *Table) uncharge(p *process, addr, size uint64) {
	size = max(size, pageSize)
	r := &p.resident
	for a := range r.in(addr, size) {
		if sp := r.spans[a]; sp == nil || (sp.start >= addr && sp.end-addr <= size) {
			t.drop(p, a)
		}
	}
	for _, sp := range r.overlapping(addr, size) {
		t.punch(p, sp, addr, size)
	}
}

// dropSpans drops p's samples larger than a page that overlap [addr,
// addr+size).
func (t *Table) dropSpans(p *process, addr, size uint64) {
	for _, sp := range p.resident.overlapping(addr, size) {
		t.drop(p, sp.key)
	}
}

// punch makes sp's pages in [addr, addr+size) holes: dropped when none
// is left, else charged for no more than its pages left, and keyed at one
// of them.
func (t *Table) punch(p *process, sp *residentSpan, addr, size uint64) {
	left := sp.punch(addr, size)
	if left == 0 {
		t.drop(p, sp.key)
		return
	}
	p.resident.shrink(sp.key, left*pageSize)
	if sp.hole(sp.key) {
		t.rekey(p, sp)
	}
}

// rekey moves a span's sample to its first page that is still its and
// holds no other sample (before 6.2, the fault's own page can lie in its
// rest), or drops it if there is none.
func (t *Table) rekey(p *process, sp *residentSpan) {
	r := &p.resident
	for a := sp.start; a < sp.end; a += pageSize {
		if _, taken := r.pages[a]; taken || sp.hole(a) {
			continue
		}
		pg := r.pages[sp.key]
		delete(r.pages, sp.key)
		delete(r.spans, sp.key)
		sp.key = a
		r.pages[a] = pg
		r.spans[a] = sp
		return
	}
	t.drop(p, sp.key)
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

// moveResident moves p's samples keyed in [from, from+size) to the same
// offsets from to: mremap moves a mapping's pages, resident ones
// included, and they stay charged to who made them resident. What was
// sampled at a destination (stale: that range was not mapped) is
// uncharged. A sample larger than a page that the range covers in part
// keeps only what moved with its key: the pages on the other side become
// holes (they stay resident, uncharged: the rare split of a huge page by
// a partial mremap costs an underestimate, never a double count).
func (t *Table) moveResident(p *process, from, size, to uint64) {
	if from == to || size == 0 {
		return
	}
	r := &p.resident
	// Spans keyed outside the range lose the pages that move.
	for _, sp := range r.overlapping(from, size) {
		if sp.key-from >= size {
			t.punch(p, sp, from, size)
		}
	}
	moving := slices.Collect(r.in(from, size))
	slices.Sort(moving) // the same order live and replayed
	pages := make([]residentPage, 0, len(moving))
	spans := make([]*residentSpan, 0, len(moving))
	keys := moving[:0]
	for _, a := range moving {
		sp := r.spans[a]
		if sp != nil && (sp.start < from || sp.end-from > size) {
			// Keyed inside, partly outside: the pages outside stay behind.
			sp.punch(sp.start, max(from, sp.start)-sp.start)
			left := sp.punch(min(from+size, sp.end), sp.end-min(from+size, sp.end))
			if left == 0 {
				t.drop(p, a)
				continue
			}
			r.shrink(a, left*pageSize)
		}
		keys = append(keys, a)
		pages = append(pages, r.pages[a])
		spans = append(spans, sp)
		delete(r.pages, a)
		if sp != nil {
			r.removeSpan(sp)
		}
	}
	// The destinations' stale samples first, the moving ones set aside.
	for i, a := range keys {
		if sp := spans[i]; sp != nil {
			t.uncharge(p, sp.start-from+to, sp.end-sp.start)
		} else {
			t.uncharge(p, a-from+to, pageSize)
		}
	}
	for i, a := range keys {
		dst := a - from + to
		r.pages[dst] = pages[i]
		origin := a
		if sp := spans[i]; sp != nil {
			origin = sp.origin
			sp.key, sp.start, sp.end, sp.origin = dst, sp.start-from+to, sp.end-from+to, sp.origin-from+to
			r.addSpan(sp)
		}
		if t.moved != nil {
			t.moved(p.pid, origin, origin-from+to)
		}
	}
}

// OnMove has f hear of each sampled fault that moves (an Mremap, a
// Moved), from the address the probes charged to the same offset in the
// new range: the live run moves the probes' count of charged pages with
// it (tracer.Objects.MovePage).
func (t *Table) OnMove(f func(pid uint32, from, to uint64)) { t.moved = f }

// OnUncharge has f hear of each sampled fault that leaves a process's
// samples still charged (an Unresident, a Refault, a new sample at its
// address, Forget), with its process and the address the probes charged:
// the live run keeps the probes' count of charged pages
// (tracer.Objects.Uncharge).
func (t *Table) OnUncharge(f func(pid uint32, addr uint64)) { t.uncharged = f }

// Charged reports whether pid has a sample charged with a page in [addr,
// addr+size): a Refault elsewhere changes nothing, and is not applied.
func (t *Table) Charged(pid uint32, addr, size uint64) bool {
	p := t.procs[pid]
	if p == nil {
		return false
	}
	size = max(size, pageSize)
	for range p.resident.in(addr, size) {
		return true
	}
	for _, sp := range p.resident.overlapping(addr, size) {
		for a := max(addr, sp.start); a < min(addr+size, sp.end); a += pageSize {
			if !sp.hole(a) {
				return true
			}
		}
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
			p = FaultProbability(uint64(pg.size), r.mean)
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
	out := make([]uint64, 0, len(p.resident.pages)-len(p.resident.spans))
	for a := range p.resident.pages {
		if p.resident.spans[a] == nil {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// SampledSpan is a sampled fault larger than a page (a huge page, an
// mTHP folio, or before 6.2 a huge page's rest): Size bytes made resident
// at once, of which Resident are still charged; the pages of [Start, End),
// less those in Holes, are still the fault's. Addr is the sample's key.
type SampledSpan struct {
	Addr, Size, Resident uint64
	Start, End           uint64
	// Holes are the pages no longer the fault's, in increasing order: made
	// resident again by another fault after a release, or (before 6.2)
	// the fault's own first page, sampled apart.
	Holes []uint64
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
	for a, sp := range p.resident.spans {
		pg := p.resident.pages[a]
		out = append(out, SampledSpan{Addr: a, Size: uint64(pg.size), Resident: uint64(pg.resident),
			Start: sp.start, End: sp.end, Holes: sp.holeAddrs()})
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
