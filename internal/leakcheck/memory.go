package leakcheck

// Memory reads a stopped target's address space.
type Memory interface {
	// ReadAt reads len(p) bytes at addr into p and returns how many bytes
	// it read: n < len(p) means the byte at addr+n could not be read (the
	// error says why, or is nil).
	ReadAt(p []byte, addr uint64) (n int, err error)
}

// BatchMemory is a Memory that reads many ranges in one go (as
// process_vm_readv does).
type BatchMemory interface {
	Memory
	// ReadBatch reads len(bufs[i]) bytes at addrs[i] into bufs[i] for each
	// i, and sets n[i] to the bytes read into bufs[i] (a prefix).
	ReadBatch(bufs [][]byte, addrs []uint64, n []int)
}

// Range is [Start, End) of the target's address space.
type Range struct {
	Start, End uint64
}

// Len is the range's size in bytes.
func (r Range) Len() uint64 {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

const (
	pageSize = 4096
	// maxIOV is how many ranges one batch read takes (IOV_MAX).
	maxIOV = 1024
)

// reader reads roots and blocks for the checker, in big pieces.
type reader struct {
	mem   Memory
	batch int
	buf   []byte
	// prefetch: the clique phase, which scans the unreached blocks in
	// address order, one leader at a time: a leader that is not in the
	// window reads ahead the unreached blocks after it.
	prefetch bool
	leader   int32
	win      window
	rest     []int32

	bufs  [][]byte
	addrs []uint64
	ns    []int
	idx   []int32
	pend  []pendBlock

	scanned, skipped uint64
}

// window caches the contents of the blocks lo..hi-1 (sorted indices) that
// were read ahead; off[j-lo] < 0 when block j was not.
type window struct {
	lo, hi int32
	off, n []int
	buf    []byte
}

func (w *window) get(i int32) ([]byte, bool) {
	if i < w.lo || i >= w.hi {
		return nil, false
	}
	o := w.off[i-w.lo]
	if o < 0 {
		return nil, false
	}
	return w.buf[o : o+w.n[i-w.lo]], true
}

// wordSpan is the part of [addr, addr+size) that holds whole aligned words.
func wordSpan(addr, size uint64) (start, end uint64) {
	start = (addr + 7) &^ 7
	end = (addr + size) &^ 7
	if end < start || addr+size < addr {
		return start, start
	}
	return start, end
}

// scanRange reads r in pieces of at most batch bytes and calls fn with
// each readable piece; unreadable pages are skipped.
func (rd *reader) scanRange(r Range, fn func(buf []byte, base uint64)) error {
	start, end := wordSpan(r.Start, r.Len())
	if cap(rd.buf) < rd.batch {
		rd.buf = make([]byte, rd.batch)
	}
	for a := start; a < end; {
		n := min(end-a, uint64(rd.batch))
		buf := rd.buf[:n]
		got, _ := rd.mem.ReadAt(buf, a)
		got &^= 7
		if got > 0 {
			rd.scanned += uint64(got)
			fn(buf[:got], a)
		}
		if uint64(got) == n {
			a += n
			continue
		}
		// Skip the unreadable page.
		bad := a + uint64(got)
		next := (bad + pageSize) &^ (pageSize - 1)
		if next > end {
			next = end
		}
		rd.skipped += next - bad
		a = next
	}
	return nil
}

// readBlocks reads the blocks of batch (sorted indices) and calls fn with
// the words of each.
func (rd *reader) readBlocks(c *checker, batch []int32, fn func(i int32, buf []byte, base uint64)) {
	if rd.prefetch {
		// Blocks read ahead are scanned from the window; a leader that is
		// not there starts a new window; the others (blocks joining the
		// clique, anywhere in the heap) are read as a batch.
		rest := rd.rest[:0]
		for _, i := range batch {
			b, ok := rd.win.get(i)
			if !ok && i == rd.leader {
				rd.readAhead(c, i)
				b, ok = rd.win.get(i)
			}
			if !ok {
				rest = append(rest, i)
				continue
			}
			start, _ := wordSpan(c.blk[i].Addr, c.blk[i].Size)
			rd.scanned += uint64(len(b))
			fn(i, b, start)
		}
		rd.rest = rest
		if len(rest) == 0 {
			return
		}
		batch = rest
	}
	if cap(rd.buf) < rd.batch {
		rd.buf = make([]byte, rd.batch)
	}
	rd.bufs, rd.addrs, rd.ns, rd.pend = rd.bufs[:0], rd.addrs[:0], rd.ns[:0], rd.pend[:0]
	used := 0
	flush := func() {
		if len(rd.pend) == 0 {
			return
		}
		rd.readMany()
		for _, p := range rd.pend {
			seg := rd.bufs[p.seg]
			if rd.ns[p.seg] >= p.off+p.n {
				b := seg[p.off : p.off+p.n]
				rd.scanned += uint64(len(b))
				fn(p.i, b, rd.addrs[p.seg]+uint64(p.off))
				continue
			}
			// Not read whole (an unreadable page in it, or in a gap
			// before it): read it alone, skipping what cannot be read.
			// rd.buf holds the rest of the batch, so with a reader of
			// its own.
			tail := reader{mem: rd.mem, batch: rd.batch}
			start, end := wordSpan(c.blk[p.i].Addr, c.blk[p.i].Size)
			_ = tail.scanRange(Range{start, end}, func(b []byte, base uint64) { fn(p.i, b, base) })
			rd.scanned += tail.scanned
			rd.skipped += tail.skipped
		}
		rd.bufs, rd.addrs, rd.ns, rd.pend = rd.bufs[:0], rd.addrs[:0], rd.ns[:0], rd.pend[:0]
		used = 0
	}
	for _, i := range batch {
		start, end := wordSpan(c.blk[i].Addr, c.blk[i].Size)
		n := int(end - start)
		if n == 0 {
			continue
		}
		if n > rd.batch {
			flush() // readOne reads through rd.buf too
			rd.readOne(c, i, fn)
			continue
		}
		// A block close after the previous one extends its range: an
		// extra range costs the kernel more than copying a small gap.
		if k := len(rd.bufs) - 1; k >= 0 {
			segEnd := rd.addrs[k] + uint64(len(rd.bufs[k]))
			if start >= segEnd && start-segEnd <= coalesceGap && used+int(end-segEnd) <= rd.batch {
				from := used - len(rd.bufs[k])
				used += int(end - segEnd)
				rd.bufs[k] = rd.buf[from:used]
				rd.pend = append(rd.pend, pendBlock{i: i, seg: k, off: int(start - rd.addrs[k]), n: n})
				continue
			}
		}
		if used+n > rd.batch || len(rd.bufs) == maxIOV {
			flush()
		}
		rd.bufs = append(rd.bufs, rd.buf[used:used+n])
		rd.addrs = append(rd.addrs, start)
		rd.ns = append(rd.ns, 0)
		rd.pend = append(rd.pend, pendBlock{i: i, seg: len(rd.bufs) - 1, n: n})
		used += n
	}
	flush()
}

// pendBlock is a block waiting in a batch: n bytes at off in range seg.
type pendBlock struct {
	i           int32
	seg, off, n int
}

// coalesceGap: blocks at most this far apart are read as one range.
const coalesceGap = 1024

// readOne streams a block bigger than a batch.
func (rd *reader) readOne(c *checker, i int32, fn func(int32, []byte, uint64)) {
	start, end := wordSpan(c.blk[i].Addr, c.blk[i].Size)
	_ = rd.scanRange(Range{start, end}, func(b []byte, base uint64) { fn(i, b, base) })
}

// readMany reads rd.bufs at rd.addrs.
func (rd *reader) readMany() {
	if bm, ok := rd.mem.(BatchMemory); ok {
		bm.ReadBatch(rd.bufs, rd.addrs, rd.ns)
		return
	}
	for k := range rd.bufs {
		rd.ns[k], _ = rd.mem.ReadAt(rd.bufs[k], rd.addrs[k])
	}
}

// readAhead fills the window with block i and the unreached blocks after
// it, up to a batch.
func (rd *reader) readAhead(c *checker, i int32) {
	w := &rd.win
	w.off, w.n = w.off[:0], w.n[:0]
	if cap(w.buf) < rd.batch {
		w.buf = make([]byte, rd.batch)
	}
	w.lo, w.hi = i, i
	rd.bufs, rd.addrs, rd.ns, rd.idx = rd.bufs[:0], rd.addrs[:0], rd.ns[:0], rd.idx[:0]
	used := 0
	for j := i; j < int32(len(c.blk)) && len(rd.idx) < maxIOV; j++ {
		start, end := wordSpan(c.blk[j].Addr, c.blk[j].Size)
		n := int(end - start)
		if used+n > rd.batch {
			break
		}
		w.hi = j + 1
		if j != i && c.state[j] != unreached {
			w.off = append(w.off, -1)
			w.n = append(w.n, 0)
			continue
		}
		w.off = append(w.off, used)
		w.n = append(w.n, 0)
		rd.bufs = append(rd.bufs, w.buf[used:used+n])
		rd.addrs = append(rd.addrs, start)
		rd.ns = append(rd.ns, 0)
		rd.idx = append(rd.idx, j)
		used += n
	}
	if len(rd.idx) == 0 {
		return
	}
	rd.readMany()
	for k, j := range rd.idx {
		got := rd.ns[k] &^ 7
		if got < len(rd.bufs[k]) {
			// Partly unreadable: not cached, read the slow way.
			w.off[j-w.lo] = -1
			continue
		}
		w.n[j-w.lo] = got
	}
}
