// Package access turns per-page readings of a process's memory (which
// pages were accessed, written, are present) into access statistics per
// epoch: per call site, per process and per large block, the live bytes
// touched, written, cold and never touched. It is pure: the readings come
// from the kernel through other packages (residency's pagemap, tracer's
// page-table walk), so the figures are testable without a kernel.
//
// Blocks smaller than a page share their pages: a page touched counts for
// every block on it, so touched is an upper bound and cold a lower bound
// for small blocks.
package access

import (
	"cmp"
	"slices"
	"sort"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// Page is what one reading says about one page, as bits.
type Page uint8

const (
	// Present: the page holds memory of its own (resident or swapped),
	// not the shared zero page: someone touched it since it was mapped.
	Present Page = 1 << iota
	// Accessed: read or written during the epoch.
	Accessed
	// Written: written during the epoch (meaningful only when the
	// reading's method knows writes).
	Written
)

// DefaultColdAfter is --cold-after's default: a page untouched for this
// many epochs is cold.
const DefaultColdAfter = 3

// LargeBlock is the size from which a block gets a record of its own.
const LargeBlock = 64 << 10

// Block is a live block (a heap block or an mmap'ed region) at the end of
// an epoch.
type Block struct {
	Addr, Size uint64
	Site       aggregate.SiteKey
	Category   aggregate.Category
}

// Figures are the access figures of a set of live bytes in one epoch.
// Touched, Cold and NeverTouched are disjoint; what is left of Live was
// untouched in the epoch but not yet for ColdAfter epochs.
type Figures struct {
	Live         uint64
	Touched      uint64
	Written      uint64 // meaningful when WrittenKnown
	WrittenKnown bool
	Cold         uint64
	NeverTouched uint64
	// LastAccessAgeNS is the age of the oldest page untouched in the
	// epoch: the time since the end of the epoch it was last accessed in
	// (or since it was first seen); 0 when every page was touched.
	LastAccessAgeNS uint64
}

// Add adds g's bytes to f's; the age is the larger.
func (f *Figures) Add(g Figures) {
	f.Live += g.Live
	f.Touched += g.Touched
	f.Written += g.Written
	f.Cold += g.Cold
	f.NeverTouched += g.NeverTouched
	f.LastAccessAgeNS = max(f.LastAccessAgeNS, g.LastAccessAgeNS)
}

// SiteFigures are a call site's figures.
type SiteFigures struct {
	Site     aggregate.SiteKey
	Category aggregate.Category
	Figures
}

// BlockFigures are a large block's figures (Live is its size).
type BlockFigures struct {
	Addr     uint64
	Site     aggregate.SiteKey
	Category aggregate.Category
	Figures
}

// Epoch is the result of one epoch of one process.
type Epoch struct {
	Number         int
	StartNS, EndNS uint64
	Method         string
	Process        Figures
	Sites          []SiteFigures  // by live bytes, largest first
	Blocks         []BlockFigures // blocks of LargeBlock bytes or more, by address
}

// Tracker keeps the pages' histories of one process across epochs: for
// each page under a live block, the epoch it was last accessed in. A page
// never seen accessed counts from the epoch before the one it was first
// seen in. Histories are kept in arrays aligned with the reading's runs,
// 4 bytes a page.
type Tracker struct {
	pageSize  uint64
	coldAfter int32
	epoch     int32    // the last epoch ended
	ends      []uint64 // ends[k]: the end of epoch k; ends[0] the start of tracking
	hist      []histRun
}

// histRun is the history of a run of pages.
type histRun struct {
	start uint64
	last  []int32
}

// NewTracker starts tracking at startNS (the first epoch's start), after
// the kernel's bits were cleared. coldAfter below 1 is 1.
func NewTracker(pageSize uint64, coldAfter int, startNS uint64) *Tracker {
	return &Tracker{pageSize: pageSize, coldAfter: int32(max(coldAfter, 1)), ends: []uint64{startNS}}
}

// Epochs is how many epochs have ended.
func (t *Tracker) Epochs() int { return int(t.epoch) }

// End ends the current epoch at nowNS: blocks are the live blocks, pages
// the reading of their pages since the epoch began (its runs as Ranges
// gives them for blocks: each block within one run; a page not read
// counts as neither present nor accessed), writtenKnown whether the
// reading tells writes, method its name. The next epoch starts at nowNS.
func (t *Tracker) End(nowNS uint64, blocks []Block, pages *Runs, writtenKnown bool, method string) Epoch {
	t.epoch++
	ep := t.epoch
	e := Epoch{Number: int(ep), StartNS: t.ends[ep-1], EndNS: nowNS, Method: method}
	t.ends = append(t.ends, nowNS)
	t.hist = t.carry(pages)
	e.Process.WrittenKnown = writtenKnown
	type siteID struct {
		site aggregate.SiteKey
		cat  aggregate.Category
	}
	sites := map[siteID]*SiteFigures{}
	ps := t.pageSize
	for _, b := range blocks {
		if b.Size == 0 {
			continue
		}
		f := Figures{Live: b.Size, WrittenKnown: writtenKnown}
		end := b.Addr + b.Size
		first := b.Addr &^ (ps - 1)
		ri := pages.find(first)
		var run *Run
		var h []int32
		if ri >= 0 {
			run, h = &pages.Runs[ri], t.hist[ri].last
		}
		for p := first; p < end; p += ps {
			n := min(end, p+ps) - max(b.Addr, p) // the block's bytes on the page
			var st Page
			last := ep - 1
			if run != nil {
				if i := (p - run.Start) / ps; i < uint64(len(run.Pages)) {
					st, last = run.Pages[i], h[i]
				}
			}
			switch {
			case st&Accessed != 0:
				f.Touched += n
				if st&Written != 0 {
					f.Written += n
				}
			case st&Present == 0:
				f.NeverTouched += n
			case ep-last >= t.coldAfter:
				f.Cold += n
			}
			if last != ep {
				f.LastAccessAgeNS = max(f.LastAccessAgeNS, nowNS-min(t.ends[last], nowNS))
			}
		}
		if b.Size >= LargeBlock {
			e.Blocks = append(e.Blocks, BlockFigures{Addr: b.Addr, Site: b.Site, Category: b.Category, Figures: f})
		}
		id := siteID{b.Site, b.Category}
		s := sites[id]
		if s == nil {
			s = &SiteFigures{Site: b.Site, Category: b.Category, Figures: Figures{WrittenKnown: writtenKnown}}
			sites[id] = s
		}
		s.Add(f)
	}
	for _, s := range sites {
		e.Process.Add(s.Figures)
		e.Sites = append(e.Sites, *s)
	}
	sort.Slice(e.Sites, func(i, j int) bool {
		a, b := e.Sites[i], e.Sites[j]
		if a.Live != b.Live {
			return a.Live > b.Live
		}
		if a.Site.Address != b.Site.Address {
			return a.Site.Address < b.Site.Address
		}
		if a.Site.StackID != b.Site.StackID {
			return a.Site.StackID < b.Site.StackID
		}
		return a.Category < b.Category
	})
	slices.SortFunc(e.Blocks, func(a, b BlockFigures) int { return cmp.Compare(a.Addr, b.Addr) })
	return e
}

// carry makes the histories of this epoch's reading: each page's from the
// last epoch's where it was read then too, else the epoch before this
// one; then this epoch for the pages accessed. Pages no longer read (no
// live block on them) forget theirs: memory freed and allocated again
// starts afresh.
func (t *Tracker) carry(pages *Runs) []histRun {
	ps, ep := t.pageSize, t.epoch
	out := make([]histRun, len(pages.Runs))
	old := t.hist
	for i, r := range pages.Runs {
		h := make([]int32, len(r.Pages))
		for j := range h {
			h[j] = ep - 1
		}
		end := r.Start + uint64(len(r.Pages))*ps
		for len(old) > 0 && old[0].start+uint64(len(old[0].last))*ps <= r.Start {
			old = old[1:] // ends before this run
		}
		for k := 0; k < len(old) && old[k].start < end; k++ {
			o := old[k]
			lo, hi := max(o.start, r.Start), min(o.start+uint64(len(o.last))*ps, end)
			for a := lo; a < hi; a += ps {
				h[(a-r.Start)/ps] = o.last[(a-o.start)/ps]
			}
		}
		for j, p := range r.Pages {
			if p&Accessed != 0 {
				h[j] = ep
			}
		}
		out[i] = histRun{start: r.Start, last: h}
	}
	return out
}

// Range is a run of whole pages [Start, End).
type Range struct{ Start, End uint64 }

// Ranges returns the pages under blocks as sorted, disjoint ranges; runs
// fewer than gap pages apart are merged, so that a reader makes fewer,
// larger reads.
func Ranges(blocks []Block, pageSize, gap uint64) []Range {
	// Each block's first page and page count packed in one integer, so
	// that the sort (most of the cost with millions of blocks) compares
	// integers: user pages number below 2^(47-12), a block spans fewer
	// than 2^countBits pages.
	keys := make([]uint64, 0, len(blocks))
	for _, b := range blocks {
		if b.Size == 0 {
			continue
		}
		first, end := b.Addr/pageSize, (b.Addr+b.Size+pageSize-1)/pageSize
		keys = append(keys, first<<countBits|min(end-first, 1<<countBits-1))
	}
	slices.Sort(keys)
	out := []Range{}
	for _, k := range keys {
		start := k >> countBits * pageSize
		r := Range{start, start + k&(1<<countBits-1)*pageSize}
		if n := len(out); n > 0 && r.Start <= out[n-1].End+gap*pageSize {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// countBits is the bits of Ranges' keys that hold a block's page count.
const countBits = 28

// Run is the reading of a range: one Page per page from Start.
type Run struct {
	Start uint64
	Pages []Page
}

// Runs is a reading made of sorted, disjoint runs.
type Runs struct {
	PageSize uint64
	Runs     []Run
}

// find returns the index of the run that holds page, or -1.
func (r *Runs) find(page uint64) int {
	i := sort.Search(len(r.Runs), func(i int) bool { return r.Runs[i].Start > page }) - 1
	if i < 0 || (page-r.Runs[i].Start)/r.PageSize >= uint64(len(r.Runs[i].Pages)) {
		return -1
	}
	return i
}

// At returns the state of the page at page (page-aligned).
func (r *Runs) At(page uint64) Page {
	if i := r.find(page); i >= 0 {
		return r.Runs[i].Pages[(page-r.Runs[i].Start)/r.PageSize]
	}
	return 0
}

// Cold reports whether every page of [start, end) that the last epoch
// read has gone untouched for the cold-after epochs; known is false when
// it read none of them (no epoch yet, or no live block there then).
func (t *Tracker) Cold(start, end uint64) (cold, known bool) {
	ps := t.pageSize
	i := sort.Search(len(t.hist), func(i int) bool {
		h := t.hist[i]
		return h.start+uint64(len(h.last))*ps > start
	})
	cold = true
	for ; i < len(t.hist) && t.hist[i].start < end; i++ {
		h := t.hist[i]
		lo := max(start&^(ps-1), h.start)
		hi := min(end, h.start+uint64(len(h.last))*ps)
		for a := lo; a < hi; a += ps {
			known = true
			if t.epoch-h.last[(a-h.start)/ps] < t.coldAfter {
				return false, true
			}
		}
	}
	return cold && known, known
}
