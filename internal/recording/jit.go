package recording

import (
	"slices"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// tagJIT: a process's JIT symbols read since the last such record
// (version 7 on).
const tagJIT = 0x1a

// SetJIT gives the Writer the JIT symbols of a process that it read after
// the first from (symbolize.Resolver.JITSymbolsFrom): they are written
// with each periodic flush and at the end, so that a replay names JIT code
// as the live run did, long after the process and its perf map are gone.
func (w *Writer) SetJIT(fn func(pid, from int) ([]symbolize.RecordedJIT, int)) { w.jitOf = fn }

// writeJIT writes the JIT symbols each process with code mappings gained.
func (w *Writer) writeJIT() {
	if w.jitOf == nil {
		return
	}
	pids := make([]int, 0, len(w.written))
	for pid := range w.written {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		syms, next := w.jitOf(pid, w.jitFrom[pid])
		if w.jitFrom == nil {
			w.jitFrom = map[int]int{}
		}
		w.jitFrom[pid] = next
		for len(syms) > 0 {
			n := min(len(syms), maxListLength)
			w.record(tagJIT)
			w.uvarint(uint64(pid))
			w.uvarint(uint64(n))
			for _, s := range syms[:n] {
				w.uvarint(s.Start)
				w.uvarint(s.Size)
				w.str(s.Name)
				w.str(s.File)
			}
			w.done()
			syms = syms[n:]
		}
	}
}

func (r *Reader) decodeJIT(rec *Record) {
	*rec = Record{Kind: KindJIT, PID: r.u32()}
	n := r.count()
	for i := 0; i < n && r.err == nil; i++ {
		s := symbolize.RecordedJIT{Start: r.uvarint(), Size: r.uvarint()}
		s.Name, s.File = r.str(), r.str()
		rec.JIT = append(rec.JIT, s)
	}
}
