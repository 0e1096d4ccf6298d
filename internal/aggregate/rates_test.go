package aggregate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/event"
)

const ms = uint64(time.Millisecond)

// near says whether got equals want to floating-point tolerance.
func near(got, want float64) bool {
	const eps = 1e-9
	return math.Abs(got-want) <= eps*math.Max(1, math.Abs(want))
}

func TestCheckHalfLife(t *testing.T) {
	p := 100 * time.Millisecond
	lo, hi := HalfLifeRange(p)
	// 2^-12 ≤ s/t ≤ 1−2^-12, exactly: hi = 4096·s, lo = ceil(4096·s/4095).
	if hi != 409600*time.Millisecond || lo != time.Duration((409600000000+4094)/4095) {
		t.Fatalf("HalfLifeRange(100ms) = %v, %v", lo, hi)
	}
	for _, tc := range []struct {
		period, halfLife time.Duration
		ok               bool
	}{
		{p, time.Second, true},
		{p, 100 * time.Second, true},
		{p, hi, true},
		{p, hi + 1, false},
		{p, lo, true},
		{p, lo - 1, false},
		{p, p, false}, // s/t = 1
		{time.Second, time.Second, false},
		{4095, 4096, true}, // s/t = 1 − 2^-12 exactly
		{4096, 4097, false},
		{1, 4096, true}, // s/t = 2^-12 exactly
		{1, 4097, false},
		{time.Hour, math.MaxInt64, false}, // no overflow
		{math.MaxInt64 / 2, math.MaxInt64, true},
	} {
		err := CheckHalfLife(tc.period, tc.halfLife)
		if (err == nil) != tc.ok {
			t.Errorf("CheckHalfLife(%v, %v) = %v, want ok=%v", tc.period, tc.halfLife, err, tc.ok)
		}
	}
	err := CheckHalfLives(time.Second, []time.Duration{10 * time.Second, time.Second})
	if err == nil {
		t.Fatal("CheckHalfLives(1s, 10s,1s) accepted s/t = 1")
	}
	for _, want := range []string{"half-life 1s", "period 1s", "from 1.000244201s to 1h8m16s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := CheckHalfLives(DefaultPeriod, DefaultHalfLives); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}

func TestPeriodRange(t *testing.T) {
	lo, hi, ok := PeriodRange([]time.Duration{time.Second, 100 * time.Second})
	if !ok || lo != time.Duration((100_000_000_000+4095)/4096) || hi != time.Duration(1_000_000_000*4095/4096) {
		t.Fatalf("PeriodRange = %v %v %v", lo, hi, ok)
	}
	for _, s := range []time.Duration{lo, hi} {
		if err := CheckHalfLives(s, []time.Duration{time.Second, 100 * time.Second}); err != nil {
			t.Errorf("period %v from PeriodRange refused: %v", s, err)
		}
	}
	if err := CheckHalfLives(lo-1, []time.Duration{100 * time.Second}); err == nil {
		t.Errorf("period below PeriodRange accepted")
	}
	if _, _, ok := PeriodRange([]time.Duration{time.Millisecond, time.Hour}); ok {
		t.Errorf("PeriodRange(1ms, 1h): a period exists? 1h/4096 > 1ms")
	}
}

// feed advances c by one period of length dt and adds d to r.
func feed(c *RateClock, r *RateSet, now *uint64, dt uint64, d Deltas) {
	*now += dt
	c.Advance(*now)
	r.Add(c, d)
}

func TestConstantInputIsThatRateAtEveryHalfLife(t *testing.T) {
	hl := []time.Duration{time.Second, 10 * time.Second, 100 * time.Second}
	now := uint64(5e12)
	c := NewRateClock(hl, now)
	r := NewRateSet(c)
	per := Deltas{AllocBytes: 1 << 20, FreedBytes: 256 << 10, Allocs: 100, Frees: 25}
	for i := 0; i < 3000; i++ {
		feed(c, &r, &now, 100*ms, per)
		// Normalized: right from the first period, no warm-up.
		for _, rt := range r.Rates(c) {
			if !near(rt.AllocBytesPerSec, 10<<20) || !near(rt.FreedBytesPerSec, 2560<<10) ||
				!near(rt.NetBytesPerSec, 7680<<10) || !near(rt.AllocsPerSec, 1000) || !near(rt.FreesPerSec, 250) {
				t.Fatalf("period %d, half-life %v: %+v", i, rt.HalfLife, rt)
			}
		}
	}
}

func TestConstantRateWithUnevenPeriods(t *testing.T) {
	hl := []time.Duration{time.Second, 10 * time.Second}
	now := uint64(0)
	c := NewRateClock(hl, now)
	r := NewRateSet(c)
	for i, dt := range []uint64{100, 37, 163, 1, 250, 99, 1000, 3} {
		// 2000 bytes and 3 calls per ms, whatever the period's length.
		feed(c, &r, &now, dt*ms, Deltas{AllocBytes: 2000 * dt, Allocs: 3 * dt})
		for _, rt := range r.Rates(c) {
			if !near(rt.AllocBytesPerSec, 2e6) || !near(rt.AllocsPerSec, 3000) || rt.FreedBytesPerSec != 0 {
				t.Fatalf("period %d (%d ms): %+v", i, dt, rt)
			}
		}
	}
}

// TestStepToZeroHalvesInOneHalfLife: after a long constant run, the input
// stops; one half-life later each average is half the constant.
func TestStepToZeroHalvesInOneHalfLife(t *testing.T) {
	for _, period := range []uint64{100 * ms, 10 * ms} {
		hl := []time.Duration{time.Second, 10 * time.Second}
		now := uint64(0)
		c := NewRateClock(hl, now)
		r := NewRateSet(c)
		// 64 half-lives of the longest: the weights' sum has converged.
		for now < 640*uint64(time.Second) {
			feed(c, &r, &now, period, Deltas{AllocBytes: 1000 * period / ms, Allocs: period / ms})
		}
		step := now
		for i, h := range hl {
			for now < step+uint64(h) {
				feed(c, &r, &now, period, Deltas{})
			}
			got := r.Rates(c)[i]
			if !near(got.AllocBytesPerSec, 1e6/2) || !near(got.NetBytesPerSec, 1e6/2) || !near(got.AllocsPerSec, 1e3/2) {
				t.Errorf("period %v, half-life %v: %.9g B/s one half-life after the step, want %.9g",
					time.Duration(period), h, got.AllocBytesPerSec, 1e6/2)
			}
		}
	}
}

// TestImpulseDecays: a single period's allocation, then nothing: the
// average decays as 2^(−Δt/t).
func TestImpulseDecays(t *testing.T) {
	hl := []time.Duration{time.Second, 10 * time.Second, 100 * time.Second}
	period := 100 * ms
	now := uint64(0)
	c := NewRateClock(hl, now)
	r := NewRateSet(c)
	lazy := NewRateSet(c) // updated only at the impulse: decays lazily
	for now < 6400*uint64(time.Second) {
		feed(c, &r, &now, period, Deltas{})
	}
	now += period
	c.Advance(now)
	r.Add(c, Deltas{AllocBytes: 1 << 30, Allocs: 1})
	lazy.Add(c, Deltas{AllocBytes: 1 << 30, Allocs: 1})
	at0 := r.Rates(c)
	t0 := now
	for k := 1; k <= 500; k++ {
		feed(c, &r, &now, period, Deltas{})
		got, gotLazy := r.Rates(c), lazy.Rates(c)
		for i, h := range hl {
			f := math.Exp2(-float64(now-t0) / float64(h))
			if !near(got[i].AllocBytesPerSec, at0[i].AllocBytesPerSec*f) || !near(got[i].AllocsPerSec, at0[i].AllocsPerSec*f) {
				t.Fatalf("%d periods after, half-life %v: %g, want %g", k, h, got[i].AllocBytesPerSec, at0[i].AllocBytesPerSec*f)
			}
			if !near(gotLazy[i].AllocBytesPerSec, got[i].AllocBytesPerSec) {
				t.Fatalf("lazy decay differs: %g vs %g", gotLazy[i].AllocBytesPerSec, got[i].AllocBytesPerSec)
			}
		}
	}
}

func TestRatesBeforeAnyPeriodAreZero(t *testing.T) {
	c := NewRateClock([]time.Duration{time.Second}, 10)
	r := NewRateSet(c)
	r.Add(c, Deltas{AllocBytes: 100})
	got := r.Rates(c)
	if len(got) != 1 || got[0] != (RateSnapshot{HalfLife: time.Second}) {
		t.Errorf("before the first period: %+v, want zeros", got)
	}
}

// --- Table ---

func allocAt(ns, addr, size, site uint64) event.Event {
	e := alloc(addr, size, site)
	e.Time = ns
	return e
}

func freeAt(ns, addr uint64) event.Event {
	e := free(addr)
	e.Time = ns
	return e
}

func ratesOfSite(t *testing.T, p ProcessSnapshot, addr uint64) []RateSnapshot {
	t.Helper()
	for _, s := range p.Sites {
		if s.Address == addr {
			return s.Rates
		}
	}
	t.Fatalf("no site %#x in %+v", addr, p.Sites)
	return nil
}

// TestTableRates drives a Table with synthetic time: a steady site, a site
// that allocated once and then idled (decayed lazily), a freeing site.
func TestTableRates(t *testing.T) {
	hl := []time.Duration{time.Second, 10 * time.Second}
	tb := NewTable()
	tb.AddProcess(testPID, "app")
	start := uint64(1e12)
	other := withPID(99, allocAt(start, 0x1, 1, site1)) // events before the rates: time starts at SetHalfLives
	tb.Apply(&other)
	tb.SetHalfLives(hl, start)

	// A reference for the idle site: fed explicitly every period.
	ref := NewRateClock(hl, start)
	refSet := NewRateSet(ref)

	addr := uint64(0x10000)
	now := start
	for k := 1; k <= 300; k++ { // 30 s of 100 ms periods
		// steady: 10 blocks of 1 KiB per period, each freed a period later
		for j := 0; j < 10; j++ {
			e := allocAt(now+uint64(j+1)*ms, addr+uint64(j)*4096, 1024, site1)
			tb.Apply(&e)
		}
		if k > 1 {
			for j := 0; j < 10; j++ {
				e := freeAt(now+uint64(j+20)*ms, addr-40960+uint64(j)*4096)
				tb.Apply(&e)
			}
		}
		var d Deltas
		if k == 5 {
			e := allocAt(now+50*ms, 0x90000000, 1<<20, site2)
			tb.Apply(&e)
			d = Deltas{AllocBytes: 1 << 20, Allocs: 1}
		}
		addr += 40960
		now += 100 * ms
		tb.Tick(now)
		ref.Advance(now)
		refSet.Add(ref, d)
	}
	p := processOf(t, tb.Snapshot(), testPID)
	steady := ratesOfSite(t, p, site1)
	for _, rt := range steady {
		// 10 KiB per 100 ms allocated; frees lag a period and began one period late.
		if !near(rt.AllocBytesPerSec, 102400) || !near(rt.AllocsPerSec, 100) {
			t.Errorf("steady site, half-life %v: %+v", rt.HalfLife, rt)
		}
		wantFree := 102400 * (1 - rateShare(rt.HalfLife, now, start+100*ms, start))
		if !near(rt.FreedBytesPerSec, wantFree) || !near(rt.NetBytesPerSec, 102400-wantFree) {
			t.Errorf("steady site, half-life %v: freed %g net %g, want %g %g", rt.HalfLife,
				rt.FreedBytesPerSec, rt.NetBytesPerSec, wantFree, 102400-wantFree)
		}
	}
	idle := ratesOfSite(t, p, site2)
	want := refSet.Rates(ref)
	for i := range idle {
		if idle[i].HalfLife != hl[i] || !near(idle[i].AllocBytesPerSec, want[i].AllocBytesPerSec) ||
			!near(idle[i].AllocsPerSec, want[i].AllocsPerSec) || idle[i].AllocBytesPerSec == 0 {
			t.Errorf("idle site, half-life %v: %+v, want %+v", hl[i], idle[i], want[i])
		}
	}
	// The process is the sum of its heap sites.
	for i, rt := range p.Rates {
		if !near(rt.AllocBytesPerSec, steady[i].AllocBytesPerSec+idle[i].AllocBytesPerSec) ||
			!near(rt.FreedBytesPerSec, steady[i].FreedBytesPerSec) {
			t.Errorf("process, half-life %v: %+v", rt.HalfLife, rt)
		}
	}
}

// rateShare is the weight of the periods in [from, upTo) in the average
// at now of a clock started at start, with uniform periods (a closed form
// of the normalized weights, up to the period's discretization).
func rateShare(h time.Duration, now, upTo, start uint64) float64 {
	w := func(a, b uint64) float64 { // Σ weights of the 100 ms periods ending in (a, b]
		s := 0.0
		for x := a + 100*ms; x <= b; x += 100 * ms {
			s += math.Exp2(-float64(now-x) / float64(h))
		}
		return s
	}
	return w(start, upTo) / w(start, now)
}

func TestTableRatesExitForgetAndChange(t *testing.T) {
	hl := []time.Duration{time.Second, 10 * time.Second}
	tb := NewTable()
	tb.SetHalfLives(hl, 0)
	now := uint64(0)
	step := func(n int, size uint64) {
		for i := 0; i < n; i++ {
			e := allocAt(now, 0x1000+now, size, site1)
			tb.Apply(&e)
			now += 100 * ms
			tb.Tick(now)
		}
	}
	step(50, 1000)
	rate := func() []RateSnapshot { return processOf(t, tb.Snapshot(), testPID).Rates }
	if r := rate(); !near(r[0].AllocBytesPerSec, 10000) || !near(r[1].AllocBytesPerSec, 10000) {
		t.Fatalf("steady: %+v", r)
	}

	// Changing one half-life restarts it alone.
	tb.SetHalfLives([]time.Duration{time.Second, 20 * time.Second}, now)
	if got := tb.HalfLives(); got[1] != 20*time.Second {
		t.Fatalf("HalfLives = %v", got)
	}
	if r := rate(); !near(r[0].AllocBytesPerSec, 10000) || r[1].HalfLife != 20*time.Second || r[1].AllocBytesPerSec != 0 {
		t.Fatalf("after the change: %+v", r)
	}
	step(1, 3000)
	if r := rate(); !near(r[1].AllocBytesPerSec, 30000) {
		t.Fatalf("restarted half-life, one period of 3000 B: %+v", r)
	}

	// An exited process keeps the rates it had at its exit.
	tb.MarkExited(testPID, now+50*ms)
	e := allocAt(now+10*ms, 0x7777000, 500, site1)
	tb.Apply(&e)
	tb.Tick(now + 100*ms)
	atExit := rate()
	tb.Tick(now + 5*uint64(time.Second))
	if r := rate(); r[0] != atExit[0] || r[1] != atExit[1] {
		t.Errorf("rates moved after exit: %+v, then %+v", atExit, r)
	}
	// The last period ended at the exit: 500 B in 50 ms.
	if atExit[1].AllocBytesPerSec <= 0 {
		t.Errorf("at exit: %+v", atExit)
	}

	// A forgotten process starts afresh.
	tb.Forget(testPID)
	now += 6 * uint64(time.Second)
	tb.Tick(now) // a process new since the last tick: its first period starts there
	step(1, 100)
	if r := rate(); !near(r[0].AllocBytesPerSec, 1000) || !near(r[1].AllocBytesPerSec, 1000) {
		t.Errorf("after Forget: %+v, want 1000 B/s from its only period", r)
	}
}

// TestRatesStartAtTheFirstEvent: rates set before any event (the session
// starts them before the first poll) count time from the first event, so
// neither events that waited in the ring nor a command's startup skew the
// first periods.
func TestRatesStartAtTheFirstEvent(t *testing.T) {
	for _, first := range []uint64{700 * ms, 1300 * ms} { // before and after SetHalfLives
		tb := NewTable()
		tb.AddProcess(testPID, "app")
		tb.SetHalfLives([]time.Duration{time.Second}, 1000*ms)
		tb.Tick(1100 * ms) // nothing yet: an empty period, dropped later
		now := first
		for i := 0; i < 30; i++ {
			e := allocAt(now, 0x1000+now, 1000, site1) // 1000 B per 100 ms
			tb.Apply(&e)
			now += 100 * ms
			if now > 1100*ms {
				tb.Tick(now)
			}
		}
		if r := processOf(t, tb.Snapshot(), testPID).Rates[0]; !near(r.AllocBytesPerSec, 10000) {
			t.Errorf("first event at %v: %g B/s, want 10000", time.Duration(first), r.AllocBytesPerSec)
		}
	}
}

func TestTableWithoutRates(t *testing.T) {
	tb := NewTable()
	applyAll(tb, []event.Event{alloc(blockA, 100, site1)})
	tb.Tick(1e9) // no SetHalfLives: nothing to do
	p := processOf(t, tb.Snapshot(), testPID)
	if p.Rates != nil || p.Sites[0].Rates != nil {
		t.Errorf("rates without SetHalfLives: %+v", p)
	}
	if tb.HalfLives() != nil {
		t.Errorf("HalfLives = %v", tb.HalfLives())
	}
}

// TestTickIdleCostsNoSiteWork: with many sites and one of them busy, a tick
// updates that site only (the others' numerators are untouched, to decay
// lazily).
func TestTickIdleCostsNoSiteWork(t *testing.T) {
	tb := NewTable()
	tb.SetHalfLives([]time.Duration{time.Second}, 0)
	for i := uint64(0); i < 5000; i++ {
		e := allocAt(1+i, 0x100000+i*64, 32, 0x400000+i)
		tb.Apply(&e)
	}
	tb.Tick(100 * ms)
	pr := tb.rates.procs[testPID]
	before := pr.sites[1].set
	e := allocAt(150*ms, 0x9000000, 32, 0x400000)
	tb.Apply(&e)
	tb.Tick(200 * ms)
	if pr.sites[1].set.at != before.at {
		t.Errorf("an idle site was updated at a tick")
	}
	if pr.sites[0].set.at != 200*ms {
		t.Errorf("the busy site was not updated")
	}
}

func BenchmarkTickManySites(b *testing.B) {
	tb := NewTable()
	tb.SetHalfLives(DefaultHalfLives, 0)
	const sites = 20000
	for i := uint64(0); i < sites; i++ {
		e := allocAt(1+i, 0x100000+i*64, 32, 0x400000+i)
		tb.Apply(&e)
	}
	now := uint64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// 100 sites busy per period.
		for j := uint64(0); j < 100; j++ {
			e := allocAt(now+1, 0x10000000+uint64(i)*8192+j*64, 32, 0x400000+(uint64(i)*100+j)%sites)
			tb.Apply(&e)
		}
		now += 100 * ms
		tb.Tick(now)
	}
}
