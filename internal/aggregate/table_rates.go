package aggregate

import (
	"slices"
	"time"
)

// rateTable is what a Table keeps for decaying rates: per process, a clock
// (the denominators), the process's heap rates, and per call site its
// numerators and the counters it had at the last tick. It lives beside the
// hot path: Apply never touches it; Tick compares counters.
type rateTable struct {
	halfLives []time.Duration
	at        uint64 // last tick (or the start), ns
	procs     map[uint32]*procRates
	// waitFirst: the rates were set before any event; periods start at
	// the first event (the tracer attaches before the session starts the
	// clock, and a command starts after it) rather than at the start.
	waitFirst bool
}

type procRates struct {
	p      *process // identity: a pid forgotten and seen again starts afresh
	clock  RateClock
	heap   RateSet
	base   Deltas // p.heap's counters at the last tick
	mapped Deltas // p.mapped's counters at the last tick
	sites  []siteRates
	frozen bool // the process exited and its last period was accounted
}

type siteRates struct {
	base Deltas
	set  RateSet
}

// SetHalfLives makes the Table keep decaying rates for halfLives (see
// RateClock), per process and per call site, from now (kernel monotonic
// ns) on; the session then calls Tick every period. Called again, it keeps
// the history of a half-life kept at the same position and restarts the
// others (their averages start afresh at the last tick). The half-lives
// are not checked against a period: that is the caller's (CheckHalfLives).
func (t *Table) SetHalfLives(halfLives []time.Duration, now uint64) {
	if t.obs != nil {
		t.obs.HalfLives(halfLives, now)
	}
	hl := slices.Clone(halfLives)
	r := t.rates
	if r == nil || len(r.halfLives) != len(hl) {
		r = &rateTable{halfLives: hl, at: now, procs: map[uint32]*procRates{}, waitFirst: !t.started}
		if t.rates != nil {
			r.at, r.waitFirst = t.rates.at, false
		}
		t.rates = r
		// Counting starts now: what processes did before is not a rate.
		for pid, p := range t.procs {
			r.procs[pid] = r.newProc(p, true)
		}
		return
	}
	for i, h := range hl {
		if r.halfLives[i] == h {
			continue
		}
		r.halfLives[i] = h
		for _, pr := range r.procs {
			pr.clock.restart(i, h)
			pr.heap.restart(i)
			for j := range pr.sites {
				pr.sites[j].set.restart(i)
			}
		}
	}
}

// HalfLives returns the half-lives the Table keeps rates for (nil if none).
func (t *Table) HalfLives() []time.Duration {
	if t.rates == nil {
		return nil
	}
	return slices.Clone(t.rates.halfLives)
}

// newProc starts p's rates at the last tick. existing says p's counters so
// far happened before counting started; otherwise they all happened since
// the last tick (p is new).
func (r *rateTable) newProc(p *process, existing bool) *procRates {
	pr := &procRates{p: p}
	pr.clock.reset(r.halfLives, r.at)
	pr.heap = NewRateSet(&pr.clock)
	if existing {
		pr.base, pr.mapped = countersOf(p.heap), countersOf(p.mapped)
		pr.growSites(len(p.sites))
		for i := range pr.sites {
			pr.sites[i].base = countersOf(p.sites[i].stats)
		}
	}
	return pr
}

// growSites extends the per-site state to n sites, with one allocation for
// the numerators of all the new ones.
func (pr *procRates) growSites(n int) {
	k := len(pr.sites)
	if n <= k {
		return
	}
	h := len(pr.clock.halfLives)
	buf := make([]nums, (n-k)*h)
	pr.sites = slices.Grow(pr.sites, n-k)
	for i := k; i < n; i++ {
		j := (i - k) * h
		pr.sites = append(pr.sites, siteRates{set: RateSet{at: pr.clock.at, num: buf[j : j+h : j+h]}})
	}
}

// Tick ends a sampling period at now (kernel monotonic ns): each process's
// counters since the last tick become that period's deltas. Only call sites
// whose counters changed are updated; the others decay lazily. A process
// whose totals did not change costs O(1). An exited process's rates are
// accounted up to its exit and then kept as they were at its exit.
func (t *Table) Tick(now uint64) {
	if t.obs != nil {
		t.obs.Tick(now)
	}
	r := t.rates
	if r == nil || now <= r.at {
		return
	}
	if r.waitFirst && t.started {
		// The first events are here: time starts with them. Periods before
		// held nothing and are dropped.
		r.waitFirst = false
		r.at = min(t.epoch, now-1)
		for _, pr := range r.procs {
			pr.clock.reset(r.halfLives, r.at)
		}
	}
	for pid, p := range t.procs {
		pr := r.procs[pid]
		if pr == nil || pr.p != p {
			pr = r.newProc(p, false)
			r.procs[pid] = pr
		}
		pr.tick(now)
	}
	if len(r.procs) > len(t.procs) {
		for pid, pr := range r.procs {
			if t.procs[pid] != pr.p {
				delete(r.procs, pid)
			}
		}
	}
	r.at = now
}

func (pr *procRates) tick(now uint64) {
	if pr.frozen {
		return
	}
	p := pr.p
	end := now
	if p.exited {
		pr.frozen = true
		if p.exitTime > pr.clock.at && p.exitTime < now {
			end = p.exitTime
		}
	}
	pr.clock.Advance(end)

	heap, mapped := countersOf(p.heap), countersOf(p.mapped)
	pr.heap.Add(&pr.clock, heap.since(pr.base))
	if heap == pr.base && mapped == pr.mapped && len(p.sites) == len(pr.sites) {
		// Every site counter only grows and the totals are their sums:
		// no site changed.
		return
	}
	pr.base, pr.mapped = heap, mapped
	pr.growSites(len(p.sites))
	for i := range p.sites {
		c := countersOf(p.sites[i].stats)
		sr := &pr.sites[i]
		if c == sr.base {
			continue
		}
		sr.set.Add(&pr.clock, c.since(sr.base))
		sr.base = c
	}
}

// fillRates sets the Rates of each process of procs, and of its sites,
// which must be in the order of p.sites (as process.snapshot makes them).
// A process or site newer than the last tick gets zero rates.
func (t *Table) fillRates(procs []ProcessSnapshot) {
	r := t.rates
	if r == nil {
		return
	}
	zero := NewRateClock(r.halfLives, r.at)
	for i := range procs {
		ps := &procs[i]
		pr := r.procs[ps.PID]
		if pr == nil || t.procs[ps.PID] != pr.p {
			empty := NewRateSet(zero)
			ps.Rates = empty.Rates(zero)
			for j := range ps.Sites {
				ps.Sites[j].Rates = empty.Rates(zero)
			}
			continue
		}
		ps.Rates = pr.heap.Rates(&pr.clock)
		for j := range ps.Sites {
			if j < len(pr.sites) {
				ps.Sites[j].Rates = pr.sites[j].set.Rates(&pr.clock)
			} else {
				empty := NewRateSet(&pr.clock)
				ps.Sites[j].Rates = empty.Rates(zero)
			}
		}
	}
}
