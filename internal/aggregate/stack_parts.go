package aggregate

import (
	"cmp"
	"math"
	"slices"
)

// Stack breakdown (SetStackBreakdown): sites stay call sites whatever
// stacks the events carry, so the tables keep one row per call site, and
// each heap site keeps its figures per stack beside them. Sampled mode
// unwinds the stacks of its samples this way: the exports (pprof, folded
// stacks) draw whole stacks from the breakdown, the tables do not change.

// stackPart is one stack's share of a heap site's figures.
type stackPart struct {
	site  uint32
	stack int32
	stats Stats
	est   estSums // sampled mode: the sums behind stats
}

type partKey struct {
	site  uint32
	stack int32
}

// stackParts is a process's breakdown.
type stackParts struct {
	parts []stackPart
	index map[partKey]uint32
	// block is the part of each live heap block: frees credit it back.
	block map[uint64]uint32
}

func newStackParts() *stackParts {
	return &stackParts{index: map[partKey]uint32{}, block: map[uint64]uint32{}}
}

// add accounts a new live block of size bytes at site si with stack
// (-1: the event had none), of weight w in sampled mode (est).
func (sp *stackParts) add(addr, size uint64, si uint32, stack int32, est *procEstimate) {
	k := partKey{si, stack}
	i, ok := sp.index[k]
	if !ok {
		i = uint32(len(sp.parts))
		sp.parts = append(sp.parts, stackPart{site: si, stack: stack})
		sp.index[k] = i
	}
	sp.block[addr] = i
	pt := &sp.parts[i]
	if est != nil {
		s, w := estWeighed(size, est.n)
		pt.est.add(s, w)
		pt.est.store(&pt.stats)
		return
	}
	pt.stats.Allocs++
	pt.stats.AllocBytes += size
	pt.stats.LiveAllocs++
	pt.stats.LiveBytes += size
}

// remove accounts the live block at addr, of size bytes, leaving.
func (sp *stackParts) remove(addr, size uint64, est *procEstimate) {
	i, ok := sp.block[addr]
	if !ok {
		return
	}
	delete(sp.block, addr)
	pt := &sp.parts[i]
	if est != nil {
		pt.est.remove(estWeighed(size, est.n))
		pt.est.store(&pt.stats)
		return
	}
	pt.stats.Frees++
	pt.stats.FreedBytes += size
	pt.stats.LiveAllocs--
	pt.stats.LiveBytes -= size
}

// StackShare is one stack's share of a site's figures (SiteSnapshot.Stacks).
type StackShare struct {
	// StackID names the stack as SiteSnapshot.StackID does; -1 for the
	// site's allocations whose stack was not taken.
	StackID int32
	Stats
}

// fill gives each heap site of ps its Stacks, largest live bytes first.
// In sampled mode the shares' rounded estimates are made to sum to the
// site's (largest remainders), so that a profile adds up to the table.
func (sp *stackParts) fill(ps *ProcessSnapshot, est *procEstimate) {
	if sp == nil {
		return
	}
	bySite := map[uint32][]int{}
	for i, pt := range sp.parts {
		bySite[pt.site] = append(bySite[pt.site], i)
	}
	for si, idx := range bySite {
		site := &ps.Sites[si]
		shares := make([]StackShare, len(idx))
		for j, i := range idx {
			shares[j] = StackShare{StackID: sp.parts[i].stack, Stats: sp.parts[i].stats}
		}
		if est != nil {
			sp.apportion(idx, site.Stats, shares)
		}
		slices.SortFunc(shares, func(a, b StackShare) int {
			if r := cmp.Compare(b.LiveBytes, a.LiveBytes); r != 0 {
				return r
			}
			if r := cmp.Compare(b.AllocBytes, a.AllocBytes); r != 0 {
				return r
			}
			return cmp.Compare(a.StackID, b.StackID)
		})
		site.Stacks = shares
	}
}

// apportion rounds the parts idx's sums so that each figure sums to the
// site's total: every share gets its sum's floor, and what the total has
// beyond goes one by one to the largest fractions. Were the sums to drift
// from the total by more than that (never expected), each share keeps its
// own rounding.
func (sp *stackParts) apportion(idx []int, total Stats, out []StackShare) {
	fields := func(s *Stats) [6]*uint64 {
		return [6]*uint64{&s.Allocs, &s.AllocBytes, &s.Frees, &s.FreedBytes, &s.LiveAllocs, &s.LiveBytes}
	}
	sums := func(e *estSums) [6]float64 {
		return [6]float64{e.allocs, e.allocBytes, e.frees, e.freedBytes, e.liveAllocs, e.liveBytes}
	}
	want := fields(&total)
	frac := make([]float64, len(idx))
	order := make([]int, len(idx))
	for f := range want {
		var floors uint64
		for j, i := range idx {
			v := max(sums(&sp.parts[i].est)[f], 0)
			fl := math.Floor(v)
			*fields(&out[j].Stats)[f] = uint64(fl)
			floors += uint64(fl)
			frac[j], order[j] = v-fl, j
		}
		if *want[f] < floors || *want[f]-floors > uint64(len(idx)) {
			for j, i := range idx {
				*fields(&out[j].Stats)[f] = *fields(&sp.parts[i].stats)[f]
			}
			continue
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(frac[b], frac[a]) })
		for _, j := range order[:*want[f]-floors] {
			*fields(&out[j].Stats)[f]++
		}
	}
}

// SetStackBreakdown makes sites call sites whatever stacks the events
// carry, each heap site keeping its figures per stack beside
// (SiteSnapshot.Stacks); off (the default), a site is a call site and a
// stack (--detail). Call it before applying events.
func (t *Table) SetStackBreakdown(on bool) {
	t.breakdown = on
	for _, p := range t.procs {
		t.initParts(p)
	}
}

func (t *Table) initParts(p *process) {
	if t.breakdown && p.parts == nil {
		p.parts = newStackParts()
	}
}

// ByStack returns the site split by stack: one SiteSnapshot per share of
// Stacks (StackID the share's, Stats its figures, no rates), or the site
// alone when it has no breakdown.
func (s SiteSnapshot) ByStack() []SiteSnapshot {
	if len(s.Stacks) == 0 {
		return []SiteSnapshot{s}
	}
	out := make([]SiteSnapshot, len(s.Stacks))
	for i, sh := range s.Stacks {
		out[i] = SiteSnapshot{Address: s.Address, Leaf: s.Leaf, StackID: sh.StackID, Category: s.Category, Stats: sh.Stats, JVMCategory: s.JVMCategory}
	}
	return out
}
