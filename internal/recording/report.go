package recording

// tagReport: a report the live run printed (version 3 on).
const tagReport = 0x17

// Report is a report the live run printed, at its point in the input
// stream: a replay prints the same one there, from a Table that holds
// what the live one held then.
type Report struct {
	// Time is the moment of the report (kernel monotonic ns).
	Time uint64
	// Final: the final records of the processes shown.
	Final bool
	// Exited: a whole-host batch of processes that exited since the last
	// one (their final snapshots were taken as each was forgotten).
	Exited bool
	// All: every process the Table holds; otherwise PIDs alone.
	All  bool
	PIDs []uint32
}

const (
	reportFinal = 1 << iota
	reportExited
	reportAll
)

// Report writes a report's record, after the code mappings that
// symbolize it.
func (w *Writer) Report(r *Report) {
	w.record(tagReport)
	var flags byte
	if r.Final {
		flags |= reportFinal
	}
	if r.Exited {
		flags |= reportExited
	}
	if r.All {
		flags |= reportAll
	}
	w.buf = append(w.buf, flags)
	w.uvarint(r.Time)
	w.uvarint(uint64(len(r.PIDs)))
	for _, pid := range r.PIDs {
		w.uvarint(uint64(pid))
	}
	w.done()
}

// decodeReport reads a report record's fields into rec.
func (r *Reader) decodeReport(rec *Record) {
	pids := rec.Report.PIDs[:0]
	*rec = Record{Kind: KindReport}
	flags, err := r.readByte()
	if err != nil {
		r.short()
		return
	}
	if flags&^(reportFinal|reportExited|reportAll) != 0 {
		r.corrupt("bad report flags")
		return
	}
	p := &rec.Report
	p.Final, p.Exited, p.All = flags&reportFinal != 0, flags&reportExited != 0, flags&reportAll != 0
	p.Time = r.uvarint()
	n := r.count()
	for i := 0; i < n && r.err == nil; i++ {
		r.ensure(maxRecordHead)
		pids = append(pids, r.u32())
	}
	p.PIDs = pids
	rec.Time = p.Time
}
