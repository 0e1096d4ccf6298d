package access

import (
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

const ps = 4096

// pageMap is a reading given page by page.
type pageMap map[uint64]Page

// runs is the reading of blocks' pages that m gives, as a reader makes it.
func (m pageMap) runs(blocks []Block) *Runs {
	r := &Runs{PageSize: ps}
	for _, rg := range Ranges(blocks, ps, 0) {
		run := Run{Start: rg.Start}
		for p := rg.Start; p < rg.End; p += ps {
			run.Pages = append(run.Pages, m[p])
		}
		r.Runs = append(r.Runs, run)
	}
	return r
}

var (
	siteA = aggregate.SiteKey{Address: 0x1000, StackID: -1}
	siteB = aggregate.SiteKey{Address: 0x2000, StackID: -1}
)

// TestEpochs follows four blocks used as the fixture uses its sites (one
// rewritten each epoch, one read each epoch, one written once then left,
// one never touched) through five epochs, with cold after 3.
func TestEpochs(t *testing.T) {
	const base = 0x10000000
	hot := Block{Addr: base, Size: 4 * ps, Site: aggregate.SiteKey{Address: 1, StackID: -1}}
	read := Block{Addr: base + 4*ps, Size: 2 * ps, Site: aggregate.SiteKey{Address: 2, StackID: -1}}
	once := Block{Addr: base + 8*ps, Size: 3 * ps, Site: aggregate.SiteKey{Address: 3, StackID: -1}}
	never := Block{Addr: base + 16*ps, Size: 5 * ps, Site: aggregate.SiteKey{Address: 4, StackID: -1}}
	blocks := []Block{hot, read, once, never}
	reading := func(epoch int) pageMap {
		m := pageMap{}
		for p := hot.Addr; p < hot.Addr+hot.Size; p += ps {
			m[p] = Present | Accessed | Written
		}
		for p := read.Addr; p < read.Addr+read.Size; p += ps {
			m[p] = Present | Accessed
		}
		for p := once.Addr; p < once.Addr+once.Size; p += ps {
			m[p] = Present
			if epoch == 1 {
				m[p] |= Accessed | Written
			}
		}
		return m
	}
	type want struct{ touched, written, cold, never, age uint64 }
	// Per epoch (1..5), per block (hot, read, once, never).
	wants := [][4]want{
		{{4 * ps, 4 * ps, 0, 0, 0}, {2 * ps, 0, 0, 0, 0}, {3 * ps, 3 * ps, 0, 0, 0}, {0, 0, 0, 5 * ps, 1000}},
		{{4 * ps, 4 * ps, 0, 0, 0}, {2 * ps, 0, 0, 0, 0}, {0, 0, 0, 0, 1000}, {0, 0, 0, 5 * ps, 2000}},
		{{4 * ps, 4 * ps, 0, 0, 0}, {2 * ps, 0, 0, 0, 0}, {0, 0, 0, 0, 2000}, {0, 0, 0, 5 * ps, 3000}},
		{{4 * ps, 4 * ps, 0, 0, 0}, {2 * ps, 0, 0, 0, 0}, {0, 0, 3 * ps, 0, 3000}, {0, 0, 0, 5 * ps, 4000}},
		{{4 * ps, 4 * ps, 0, 0, 0}, {2 * ps, 0, 0, 0, 0}, {0, 0, 3 * ps, 0, 4000}, {0, 0, 0, 5 * ps, 5000}},
	}
	tr := NewTracker(ps, 3, 0)
	for i, w := range wants {
		e := tr.End(uint64(i+1)*1000, blocks, reading(i+1).runs(blocks), true, "test")
		if e.Number != i+1 || e.StartNS != uint64(i)*1000 || e.EndNS != uint64(i+1)*1000 {
			t.Fatalf("epoch %d: number %d, %d..%d", i+1, e.Number, e.StartNS, e.EndNS)
		}
		var total Figures
		for j, b := range blocks {
			var got *SiteFigures
			for k := range e.Sites {
				if e.Sites[k].Site == b.Site {
					got = &e.Sites[k]
				}
			}
			if got == nil {
				t.Fatalf("epoch %d: no site %v", i+1, b.Site)
			}
			g := want{got.Touched, got.Written, got.Cold, got.NeverTouched, got.LastAccessAgeNS}
			if g != w[j] || got.Live != b.Size || !got.WrittenKnown {
				t.Errorf("epoch %d, block %d: got %+v (live %d), want %+v", i+1, j, g, got.Live, w[j])
			}
			total.Add(got.Figures)
		}
		total.WrittenKnown = true
		if e.Process != total {
			t.Errorf("epoch %d: process %+v, want the sum %+v", i+1, e.Process, total)
		}
		if len(e.Blocks) != 0 {
			t.Errorf("epoch %d: %d large blocks, want none", i+1, len(e.Blocks))
		}
	}
}

// TestSharedPages: blocks smaller than a page share it; a touched page
// counts for each of them (an upper bound), each for its own bytes.
func TestSharedPages(t *testing.T) {
	blocks := []Block{
		{Addr: 0x5000, Size: 100, Site: siteA},
		{Addr: 0x5100, Size: 200, Site: siteB},
		{Addr: 0x5ff0, Size: 0x20, Site: siteB}, // straddles 0x5000 and 0x6000
	}
	tr := NewTracker(ps, 3, 0)
	e := tr.End(10, blocks, pageMap{0x5000: Present | Accessed, 0x6000: Present}.runs(blocks), false, "test")
	got := map[aggregate.SiteKey]Figures{}
	for _, s := range e.Sites {
		got[s.Site] = s.Figures
	}
	want := map[aggregate.SiteKey]Figures{
		siteA: {Live: 100, Touched: 100},
		siteB: {Live: 232, Touched: 216, LastAccessAgeNS: 10},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("site %x: got %+v, want %+v", k.Address, got[k], w)
		}
	}
	if e.Process.Written != 0 || e.Process.WrittenKnown {
		t.Errorf("written known without a method that knows it: %+v", e.Process)
	}
}

// TestLargeBlocksAndForgetting: blocks of 64 KiB or more get records;
// pages no longer under a block forget their history, so a block
// allocated at the same place starts afresh.
func TestLargeBlocksAndForgetting(t *testing.T) {
	big := Block{Addr: 0x100000, Size: LargeBlock, Site: siteA}
	tr := NewTracker(ps, 1, 0)
	one := []Block{big}
	e := tr.End(100, one, pageMap{0x100000: Present}.runs(one), false, "test")
	if len(e.Blocks) != 1 || e.Blocks[0].Addr != big.Addr || e.Blocks[0].Live != LargeBlock ||
		e.Blocks[0].Cold != ps || e.Blocks[0].NeverTouched != LargeBlock-ps {
		t.Fatalf("large block: %+v", e.Blocks)
	}
	e = tr.End(200, nil, pageMap{}.runs(nil), false, "test")
	if len(tr.hist) != 0 || len(e.Sites) != 0 {
		t.Fatalf("pages kept after the block went: %d runs", len(tr.hist))
	}
	// Allocated again: with cold after 1 epoch its page is cold at once,
	// untouched for the whole epoch it was first seen in.
	e = tr.End(300, one, pageMap{0x100000: Present}.runs(one), false, "test")
	if e.Blocks[0].LastAccessAgeNS != 100 || e.Blocks[0].Cold != ps {
		t.Fatalf("a new block's age: %+v", e.Blocks[0])
	}
}

func TestRanges(t *testing.T) {
	tests := []struct {
		blocks []Block
		gap    uint64
		want   []Range
	}{
		{nil, 0, []Range{}},
		{[]Block{{Addr: 0x3010, Size: 10}, {Addr: 0x1000, Size: ps}}, 0, []Range{{0x1000, 0x2000}, {0x3000, 0x4000}}},
		{[]Block{{Addr: 0x3010, Size: 10}, {Addr: 0x1000, Size: ps}}, 1, []Range{{0x1000, 0x4000}}},
		{[]Block{{Addr: 0x1000, Size: 3 * ps}, {Addr: 0x2000, Size: 1}}, 0, []Range{{0x1000, 0x4000}}},
	}
	for i, tt := range tests {
		got := Ranges(tt.blocks, ps, tt.gap)
		if len(got) != len(tt.want) {
			t.Fatalf("%d: got %v, want %v", i, got, tt.want)
		}
		for j := range got {
			if got[j] != tt.want[j] {
				t.Errorf("%d: got %v, want %v", i, got, tt.want)
			}
		}
	}
}

func TestRunsAt(t *testing.T) {
	r := Runs{PageSize: ps, Runs: []Run{{0x1000, []Page{Present, Accessed}}, {0x8000, []Page{Written}}}}
	for _, c := range []struct {
		p    uint64
		want Page
	}{{0, 0}, {0x1000, Present}, {0x2000, Accessed}, {0x3000, 0}, {0x8000, Written}, {0x9000, 0}} {
		if got := r.At(c.p); got != c.want {
			t.Errorf("At(%#x) = %v, want %v", c.p, got, c.want)
		}
	}
}

// TestHistoryCarried: a block's pages keep their history while blocks
// around it come and go (the runs read change shape).
func TestHistoryCarried(t *testing.T) {
	a := Block{Addr: 0x10000, Size: 2 * ps, Site: siteA}
	b := Block{Addr: 0x13000, Size: 2 * ps, Site: siteB}
	c := Block{Addr: 0x12000, Size: ps, Site: siteA} // fills the gap: a, c and b make one run
	epochs := [][]Block{{a, b}, {b}, {c, b}, {a, c, b}}
	tr := NewTracker(ps, 3, 0)
	var e Epoch
	for i, blocks := range epochs {
		m := pageMap{}
		for _, bl := range blocks {
			for p := bl.Addr; p < bl.Addr+bl.Size; p += ps {
				m[p] = Present
				if i == 0 && bl.Site == siteB {
					m[p] |= Accessed
				}
			}
		}
		e = tr.End(uint64(i+1)*10, blocks, m.runs(blocks), false, "test")
	}
	for _, s := range e.Sites {
		// b: accessed in epoch 1, cold at 4; a and c: seen first in 4 and 3.
		want := map[aggregate.SiteKey]Figures{
			siteB: {Live: 2 * ps, Cold: 2 * ps, LastAccessAgeNS: 30},
			siteA: {Live: 3 * ps, LastAccessAgeNS: 20},
		}[s.Site]
		if s.Figures != want {
			t.Errorf("site %x: %+v, want %+v", s.Site.Address, s.Figures, want)
		}
	}
}

// TestTrackerCold: a range is cold when every page read of it is.
func TestTrackerCold(t *testing.T) {
	hot := Block{Addr: 0x10000, Size: ps, Site: siteA}
	idle := Block{Addr: 0x11000, Size: 2 * ps, Site: siteB}
	blocks := []Block{hot, idle}
	tr := NewTracker(ps, 2, 0)
	for i := 1; i <= 2; i++ {
		tr.End(uint64(i), blocks, pageMap{0x10000: Present | Accessed, 0x11000: Present, 0x12000: Present}.runs(blocks), false, "test")
	}
	for _, c := range []struct {
		start, end  uint64
		cold, known bool
	}{
		{0x11000, 0x13000, true, true},
		{0x10000, 0x13000, false, true},
		{0x11800, 0x11900, true, true},
		{0x20000, 0x21000, false, false},
	} {
		if cold, known := tr.Cold(c.start, c.end); cold != c.cold || known != c.known {
			t.Errorf("Cold(%#x, %#x) = %v, %v; want %v, %v", c.start, c.end, cold, known, c.cold, c.known)
		}
	}
}
