package recording

import "github.com/memtrace/memtrace/internal/access"

// tagAccess: an access statistics record (version 7 on): a process's
// tracking starts, or one of its epochs ends with the reading its figures
// are folded from. The figures themselves are not written: a replay folds
// the reading with the live blocks its Table holds at that point, as the
// live run did (access.Tracker), so both give the same figures.
const tagAccess = 0x19

// Access is an access statistics record of PID at Time (kernel monotonic
// ns).
type Access struct {
	PID  uint32
	Time uint64
	// Start: tracking starts (its bits were just cleared), and epoch 1
	// with it; a start for a PID already tracked starts afresh (an exec).
	// ColdAfter is --cold-after.
	Start     bool
	ColdAfter int
	// PageSize: the start's page size (an epoch's is Pages.PageSize).
	PageSize uint64
	// An epoch's end: Final (the process's last), Comm (its name in the
	// records), WrittenKnown and Method (the reading's), Pages (the
	// reading of the pages under its live blocks).
	Final        bool
	WrittenKnown bool
	Comm         string
	Method       string
	Pages        access.Runs
}

const (
	accessStart = 1 << iota
	accessFinal
	accessWrittenKnown
)

// maxAccessPages bounds the pages of one record (1 TiB of 4 KiB pages),
// so that a corrupt count cannot make a reader allocate without bound.
const maxAccessPages = 1 << 28

// Access writes an access statistics record. Pages are run-length coded:
// a page's bits change rarely from one page to the next.
func (w *Writer) Access(a *Access) {
	w.record(tagAccess)
	var flags byte
	if a.Start {
		flags |= accessStart
	}
	if a.Final {
		flags |= accessFinal
	}
	if a.WrittenKnown {
		flags |= accessWrittenKnown
	}
	w.buf = append(w.buf, flags)
	w.uvarint(uint64(a.PID))
	w.uvarint(a.Time)
	if a.Start {
		w.uvarint(uint64(max(a.ColdAfter, 0)))
		w.uvarint(a.PageSize)
		w.done()
		return
	}
	w.str(a.Comm)
	w.str(a.Method)
	w.uvarint(a.Pages.PageSize)
	w.uvarint(uint64(len(a.Pages.Runs)))
	for _, r := range a.Pages.Runs {
		w.uvarint(r.Start)
		w.uvarint(uint64(len(r.Pages)))
		for i := 0; i < len(r.Pages); {
			j := i + 1
			for j < len(r.Pages) && r.Pages[j] == r.Pages[i] {
				j++
			}
			w.buf = append(w.buf, byte(r.Pages[i]))
			w.uvarint(uint64(j - i))
			i = j
		}
		if len(w.buf) >= bufLimit {
			w.push() // a big reading goes out run by run
		}
	}
	w.done()
}

// decodeAccess reads an access record's fields into rec.
func (r *Reader) decodeAccess(rec *Record) {
	*rec = Record{Kind: KindAccess}
	flags, err := r.readByte()
	if err != nil {
		r.short()
		return
	}
	if flags&^(accessStart|accessFinal|accessWrittenKnown) != 0 {
		r.corrupt("bad access flags")
		return
	}
	a := &rec.Access
	a.Start, a.Final, a.WrittenKnown = flags&accessStart != 0, flags&accessFinal != 0, flags&accessWrittenKnown != 0
	a.PID, a.Time = r.u32(), r.uvarint()
	rec.PID, rec.Time = a.PID, a.Time
	if a.Start {
		a.ColdAfter = int(min(r.uvarint(), 1<<20))
		a.PageSize = r.uvarint()
		r.checkPageSize(a.PageSize)
		return
	}
	a.Comm, a.Method = r.str(), r.str()
	r.ensure(maxRecordHead)
	a.Pages.PageSize = r.uvarint()
	if r.checkPageSize(a.Pages.PageSize); r.err != nil {
		return
	}
	n := r.count()
	total := uint64(0)
	for i := 0; i < n && r.err == nil; i++ {
		r.ensure(2 * 10)
		run := access.Run{Start: r.uvarint()}
		pages := r.uvarint()
		if total += pages; total > maxAccessPages {
			r.corrupt("access reading too large")
			return
		}
		run.Pages = make([]access.Page, 0, min(pages, 1<<16)) // grows as pages come: a count alone allocates little
		for uint64(len(run.Pages)) < pages && r.err == nil {
			r.ensure(1 + 10)
			b, err := r.readByte()
			if err != nil {
				r.short()
				return
			}
			k := r.uvarint()
			if r.err == nil && (b > byte(access.Present|access.Accessed|access.Written) || k == 0 || k > pages-uint64(len(run.Pages))) {
				r.corrupt("bad access pages")
				return
			}
			for range k {
				run.Pages = append(run.Pages, access.Page(b))
			}
		}
		a.Pages.Runs = append(a.Pages.Runs, run)
	}
}

// checkPageSize fails the reader on a page size that is not a power of
// two.
func (r *Reader) checkPageSize(ps uint64) {
	if r.err == nil && (ps == 0 || ps&(ps-1) != 0) {
		r.corrupt("bad page size")
	}
}
