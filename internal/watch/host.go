package watch

import (
	"fmt"

	"github.com/mattn/go-runewidth"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
)

// The whole host's view (Options.Host): a table of every process, like
// top's, ranked by a footprint key, with the selected process (↑/↓) and
// what its sampled faults made resident, site by site; with --heap its
// allocator panel (rates and call sites) follows.

const hostHelp = "q quit  ↑/↓ select  s sort  p pause  ←/→ half-life  + double  - halve  r reset"

// hostRowFormat lays out the table: pid, comm, the footprint, then what
// was made resident while traced.
const hostRowFormat = "%7s  %-15s %10s %10s %10s %9s %9s %10s %10s %10s"

// hostRows is the processes the view shows, ranked, with the selected
// one's index.
func hostRows(st *state) ([]aggregate.ProcessSnapshot, int) {
	procs := report.RankHost(st.frame.Snap.Processes, st.sort)
	sel := -1
	for i, p := range procs {
		if p.PID == st.pid {
			sel = i
			break
		}
	}
	if sel < 0 && len(procs) > 0 {
		// The selected process is gone: the one at its place now.
		sel = min(st.row, len(procs)-1)
		st.pid = procs[sel].PID
	}
	st.row = max(sel, 0)
	return procs, sel
}

// moveSelection moves the selected row by d, within the list.
func (st *state) moveSelection(d int) {
	if st.frame == nil {
		return
	}
	procs, sel := hostRows(st)
	if len(procs) == 0 {
		return
	}
	sel = min(max(sel+d, 0), len(procs)-1)
	st.row, st.pid = sel, procs[sel].PID
}

// drawHost draws the whole host's view from line y.
func drawHost(c canvas, y int, st *state) {
	procs, sel := hostRows(st)
	traced := 0
	for _, p := range procs {
		if !p.Untraced {
			traced++
		}
	}
	c.put(0, y, fmt.Sprintf(" %d processes by %s, %d traced; ~RESIDENT: made resident while traced (sampled faults)",
		len(procs), sortWords(st.sort), traced), stHelp)
	y++
	c.put(0, y, fmt.Sprintf(hostRowFormat, "PID", "COMM", "RSS", "ANON", "FILE", "SHMEM", "SWAP", "PSS", "~RESIDENT", "± RES"), stHead)
	y++
	if len(procs) == 0 {
		c.put(0, y, "no process yet", stPlain)
		return
	}
	avail := c.h - y
	rows := max(3, avail/2)
	if st.heap {
		rows = max(3, avail/3)
	}
	rows = min(rows, len(procs))
	first := min(max(0, sel-rows/2), len(procs)-rows)
	for i := first; i < first+rows && y < c.h; i++ {
		s := stPlain
		if i == sel {
			s = stSel
		}
		c.fill(y, hostRow(procs[i]), s)
		y++
	}
	if sel < 0 || y >= c.h {
		return
	}
	p := procs[sel]
	y++
	y = drawResidentSites(c, y, p, st)
	if st.heap && !p.Untraced && y < c.h {
		y++
		drawProcess(c, y, p, st, max(1, c.h-y-6-len(st.frame.Settings.HalfLives)))
	}
}

// sortWords says what the table is ranked by.
func sortWords(k report.SortKey) string {
	switch report.HostKey(k) {
	case report.SortAnon:
		return "anonymous RSS"
	case report.SortPSS:
		return "PSS"
	case report.SortSwap:
		return "swap"
	case report.SortResident:
		return "memory made resident while traced"
	}
	return "RSS"
}

// hostRow is one process's row: "-" for what it has no figure of.
func hostRow(p aggregate.ProcessSnapshot) string {
	foot := []string{"-", "-", "-", "-", "-", "-"}
	if f := p.Footprint; f != nil && f.RSS > 0 {
		for i, n := range []uint64{f.RSS, f.RSSAnon, f.RSSFile, f.RSSShmem, f.Swap, f.PSS} {
			foot[i] = report.HumanBytes(n)
		}
	}
	res, se := "-", "-"
	if r := p.Resident; r != nil {
		res, se = report.HumanBytes(r.Bytes), report.HumanBytes(uint64(r.Stderr+0.5))
	}
	comm := p.Comm
	if p.Exited {
		comm += " (exited)"
	}
	return fmt.Sprintf(hostRowFormat, fmt.Sprint(p.PID), runewidth.Truncate(comm, 15, "…"),
		foot[0], foot[1], foot[2], foot[3], foot[4], foot[5], res, se)
}

// drawResidentSites lists the selected process's sites by what they
// made resident, as many as fit before the allocator panel.
func drawResidentSites(c canvas, y int, p aggregate.ProcessSnapshot, st *state) int {
	head := fmt.Sprintf("pid %d %s", p.PID, p.Comm)
	x := c.put(0, y, head, stProc)
	r := p.Resident
	switch {
	case r == nil && p.Untraced:
		c.put(x, y, "   no fault sampled, no allocation seen while traced", stPlain)
		return y + 1
	case r == nil:
		c.put(x, y, "   no fault sampled while traced", stPlain)
		return y + 1
	}
	c.put(x, y, fmt.Sprintf("   made resident while traced: ~%s ± %s in %d sampled pages",
		report.HumanBytes(r.Bytes), report.HumanBytes(uint64(r.Stderr+0.5)), r.Pages), stPlain)
	y++
	c.put(0, y, fmt.Sprintf(" %10s %10s  %-40s %s", "~RESIDENT", "± RES", "FUNCTION", "LOCATION"), stHead)
	y++
	rows := c.h - y
	if st.heap && !p.Untraced {
		rows = min(rows, 5)
	}
	for i, s := range r.Sites {
		if i >= rows || y >= c.h {
			break
		}
		fn, loc := st.labels(p.PID, s.Address)
		c.put(0, y, fmt.Sprintf(" %10s %10s  %-40s %s", report.HumanBytes(s.Bytes), report.HumanBytes(uint64(s.Stderr+0.5)),
			runewidth.Truncate(fn, 40, "…"), loc), stPlain)
		y++
	}
	return y
}
