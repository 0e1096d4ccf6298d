package aggregate

// Mark is a named moment a traced program chose (--mark FUNC): the
// program called FUNC, with Label as its first argument.
type Mark struct {
	PID   uint32
	Label string
	// Seq numbers the process's marks from 1.
	Seq uint64
	// Time is the kernel monotonic time (ns) of the call.
	Time uint64
}

// Mark records that pid reached a mark; seq is given by the Table.
// It returns the mark as recorded.
func (t *Table) Mark(pid uint32, label string, when uint64) Mark {
	p := t.proc(pid)
	p.marks++
	m := Mark{PID: pid, Label: label, Seq: p.marks, Time: when}
	t.marks = append(t.marks, m)
	if when > t.newest {
		t.newest = when
	}
	if t.obs != nil {
		t.obs.Mark(m)
	}
	return m
}

// Marks returns the marks recorded so far, oldest first.
func (t *Table) Marks() []Mark { return append([]Mark(nil), t.marks...) }
