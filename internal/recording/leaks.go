package recording

import (
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/leakcheck"
)

// LeakCheck is one process's leak check as the live run made it: what it
// concluded about each block live then. Judging it (suppressions, which
// kinds count, --fail-on-leak) is left to the reader, so that a replay can
// judge a recorded run again with other settings.
type LeakCheck struct {
	PID uint32
	// Time is when the check ran (CLOCK_MONOTONIC ns).
	Time uint64
	Comm string
	// When says at what point of the process's life: "at exit", "when the
	// run ended".
	When string
	// Cwd is the process's working directory (relative source paths).
	Cwd string
	// Err says why the check could not run ("" when it ran).
	Err          string
	ScannedBytes uint64
	// Blocks are the blocks checked, by address. They are the process's
	// live blocks in the Table at that point, plus, with -f, those a
	// forked child inherited from its parent (in no Table of its own):
	// each carries its size and site so that the record stands alone.
	Blocks []LeakBlock
}

// LeakBlock is a block and its class.
type LeakBlock = leakcheck.SiteBlock

// SortLeakBlocks sorts blocks by address, the order a LeakCheck holds.
func SortLeakBlocks(blocks []LeakBlock) { leakcheck.SortBlocks(blocks) }

// classByte packs a block's class (2 bits) and heuristic (4 bits).
func classByte(b *LeakBlock) byte { return byte(b.Class) | byte(b.Heuristic)<<2 }

// LeakCheck writes a process's leak check, and flushes: the check runs
// when the process ends, the last thing a killed run should lose. It
// sorts c.Blocks by address.
func (w *Writer) LeakCheck(c *LeakCheck) {
	if w.hasMaps.Load() {
		w.writeMaps()
	}
	SortLeakBlocks(c.Blocks)
	// Every site was defined by the allocation that made its blocks; a
	// site defined here would be one memtrace never saw allocate.
	sites := make([]uint64, len(c.Blocks))
	for i, b := range c.Blocks {
		sites[i] = w.site(b.Site.Address, b.Site.Address, b.Site.StackID)
	}
	w.record(tagLeakCheck)
	w.uvarint(uint64(c.PID))
	w.uvarint(c.Time)
	w.str(c.Comm)
	w.str(c.When)
	w.str(c.Cwd)
	w.str(c.Err)
	w.uvarint(c.ScannedBytes)
	w.uvarint(uint64(len(c.Blocks)))
	prev := uint64(0)
	for i := range c.Blocks {
		b := &c.Blocks[i]
		w.uvarint(b.Addr - prev)
		prev = b.Addr
		w.uvarint(b.Size)
		w.uvarint(sites[i])
		w.buf = append(w.buf, classByte(b))
		if b.Class == leakcheck.Definite {
			w.uvarint(b.Indirect)
		}
	}
	w.Flush()
}

// maxLeakBlocks bounds a leak check record's blocks (a count read from a
// corrupt file must not be believed further).
const maxLeakBlocks = 1 << 32

// decodeLeakCheck reads a leak check record's fields into rec.
func (r *Reader) decodeLeakCheck(rec *Record) {
	blocks := rec.Leak.Blocks[:0]
	*rec = Record{Kind: KindLeakCheck}
	c := &rec.Leak
	c.PID, c.Time = r.u32(), r.uvarint()
	c.Comm, c.When, c.Cwd, c.Err = r.str(), r.str(), r.str(), r.str()
	c.ScannedBytes = r.uvarint()
	n := r.uvarint()
	if n > maxLeakBlocks {
		r.corrupt("too many leak check blocks")
	}
	addr := uint64(0)
	for i := uint64(0); i < n && r.err == nil; i++ {
		// A record can be far longer than a read chunk.
		r.ensure(maxRecordHead)
		addr += r.uvarint()
		b := LeakBlock{Addr: addr, Size: r.uvarint()}
		si := r.uvarint()
		if r.err != nil {
			break
		}
		if si >= uint64(len(r.sites)) {
			r.corrupt("undefined call site")
			break
		}
		s := r.sites[si]
		b.Site = aggregate.SiteKey{Address: s.addr, StackID: s.stack}
		if r.pos >= len(r.buf) {
			r.short()
			break
		}
		cb := r.buf[r.pos]
		r.pos++
		if cb>>6 != 0 {
			r.corrupt("bad leak class")
			break
		}
		b.Class, b.Heuristic = leakcheck.Class(cb&3), leakcheck.Heuristic(cb>>2)
		if b.Class == leakcheck.Definite {
			b.Indirect = r.uvarint()
		}
		blocks = append(blocks, b)
	}
	c.Blocks = blocks
	rec.PID, rec.Time = c.PID, c.Time
}
