package recording

import "github.com/memtrace/memtrace/internal/footprint"

// Footprint writes a footprint reading of pid taken at now (kernel
// monotonic ns): not an input of the Table, but what the live run's
// reports showed of the process's memory, for a replay to show again.
// ranges are the tracked regions r.Ranges describes, in order.
func (w *Writer) Footprint(pid uint32, now uint64, r footprint.Reading, ranges []footprint.Range) {
	w.record(tagFootprint)
	w.uvarint(uint64(pid))
	w.uvarint(now)
	w.reading(r, ranges)
	w.done()
}

// tagListed: a process a whole-host report listed for its footprint alone
// (version 6 on).
const tagListed = 0x18

// Listed writes a process the next report lists though the Table does
// not hold it (whole host: no event of it met), with its name and its
// reading taken at now, so that a replay lists it too.
func (w *Writer) Listed(pid uint32, comm string, now uint64, r footprint.Reading) {
	w.record(tagListed)
	w.uvarint(uint64(pid))
	w.str(comm)
	w.uvarint(now)
	w.reading(r, nil)
	w.done()
}

func (r *Reader) decodeListed(rec *Record) {
	*rec = Record{Kind: KindListed, PID: r.u32(), Comm: r.str(), Time: r.uvarint()}
	r.decodeReading(rec)
}

// reading writes a reading's fields and the n tracked ranges it split.
func (w *Writer) reading(r footprint.Reading, ranges []footprint.Range) {
	for _, v := range []uint64{r.RSSAnon, r.RSSFile, r.RSSShmem, r.HeapResident, r.AnonResident,
		r.StackResident, r.FileResident, r.Unexplained, r.CgroupMemory} {
		w.uvarint(v)
	}
	w.str(r.Cgroup)
	attached := uint64(0)
	if r.Attached {
		attached = 1
	}
	w.uvarint(attached)
	n := min(len(ranges), len(r.Ranges))
	w.uvarint(uint64(n))
	for i := range n {
		g, st := ranges[i], r.Ranges[i]
		w.uvarint(g.Start)
		w.uvarint(g.End - g.Start)
		w.uvarint(st.Reserved)
		w.uvarint(st.Committed)
		w.uvarint(st.Resident)
	}
	// Version 5 on: a Go program's heap.
	for _, v := range []uint64{r.GoHeap.Reserved, r.GoHeap.Committed, r.GoHeap.Resident, r.GoRuntimeResident} {
		w.uvarint(v)
	}
	w.str(r.GoHeapSource)
	// Version 6 on: the swap, the PSS, and whether the reading is a rollup.
	rollup := uint64(0)
	if r.Rollup {
		rollup = 1
	}
	for _, v := range []uint64{r.Swap, r.PSS, rollup} {
		w.uvarint(v)
	}
	// Version 7 on: the runtime heaps.
	w.uvarint(uint64(len(r.ManagedHeaps)))
	for _, h := range r.ManagedHeaps {
		located := uint64(0)
		if h.Located {
			located = 1
		}
		w.str(h.Name)
		for _, v := range []uint64{h.Reserved, h.Committed, h.Resident, located} {
			w.uvarint(v)
		}
		w.str(h.Source)
	}
}

func (r *Reader) decodeFootprint(rec *Record) {
	*rec = Record{Kind: KindFootprint, PID: r.u32(), Time: r.uvarint()}
	r.decodeReading(rec)
}

// decodeReading reads what reading wrote into rec.
func (r *Reader) decodeReading(rec *Record) {
	f := &rec.Footprint
	for _, p := range []*uint64{&f.RSSAnon, &f.RSSFile, &f.RSSShmem, &f.HeapResident, &f.AnonResident,
		&f.StackResident, &f.FileResident, &f.Unexplained, &f.CgroupMemory} {
		*p = r.uvarint()
	}
	f.RSS = f.RSSAnon + f.RSSFile + f.RSSShmem
	r.ensure(maxRecordHead) // the head's eleven varints are read
	f.Cgroup = r.str()
	f.Attached = r.uvarint() != 0
	n := r.count()
	for i := 0; i < n && r.err == nil; i++ {
		r.ensure(5 * 10) // five varints: a long list can outrun the record head
		start := r.uvarint()
		rec.FootprintRanges = append(rec.FootprintRanges, footprint.Range{Start: start, End: start + r.uvarint()})
		f.Ranges = append(f.Ranges, footprint.State{Reserved: r.uvarint(), Committed: r.uvarint(), Resident: r.uvarint()})
	}
	if r.version >= 5 {
		r.ensure(maxRecordHead)
		for _, p := range []*uint64{&f.GoHeap.Reserved, &f.GoHeap.Committed, &f.GoHeap.Resident, &f.GoRuntimeResident} {
			*p = r.uvarint()
		}
		f.GoHeapSource = r.str()
	}
	if r.version >= 6 {
		r.ensure(3 * 10)
		f.Swap, f.PSS, f.Rollup = r.uvarint(), r.uvarint(), r.uvarint() != 0
	}
	if r.version >= 7 {
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			r.ensure(maxRecordHead)
			h := footprint.ManagedHeap{Name: r.str()}
			h.Reserved, h.Committed, h.Resident, h.Located = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint() != 0
			h.Source = r.str()
			f.ManagedHeaps = append(f.ManagedHeaps, h)
		}
	}
}
