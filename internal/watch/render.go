package watch

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/mattn/go-runewidth"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// The log scale of the bars: from 1 B/s (empty) to 2^scaleBits B/s (full).
// Ticks mark 1 KiB/s, 1 MiB/s and 1 GiB/s.
const scaleBits = 34 // 16 GiB/s

var ticks = []struct {
	bits  int
	label string
}{{10, "1K"}, {20, "1M"}, {30, "1G"}}

// eighths are the partial blocks for a bar's last cell.
var eighths = []rune{' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'}

// barCells returns how many eighths of a cell a bar of width w shows for
// |v| bytes per second on the log scale.
func barCells(v float64, w int) int {
	v = math.Abs(v)
	if w <= 0 || !(v > 1) {
		return 0
	}
	f := math.Log2(v) / scaleBits
	return int(math.Round(min(f, 1) * float64(w*8)))
}

// barString is the bar itself, padded to w cells.
func barString(v float64, w int) string {
	n := barCells(v, w)
	var b strings.Builder
	b.WriteString(strings.Repeat("█", n/8))
	cells := n / 8
	if n%8 != 0 {
		b.WriteRune(eighths[n%8])
		cells++
	}
	b.WriteString(strings.Repeat(" ", max(0, w-cells)))
	return b.String()
}

// axis is the tick line under a bar of width w.
func axis(w int) string {
	line := []rune(strings.Repeat(" ", w))
	for _, t := range ticks {
		x := int(math.Round(float64(t.bits) / scaleBits * float64(w)))
		if x+len(t.label) > w || x < 0 {
			continue
		}
		copy(line[x:], []rune(t.label))
	}
	return string(line)
}

// Styles.
var (
	stTitle  = tcell.StyleDefault.Reverse(true)
	stHelp   = tcell.StyleDefault.Dim(true)
	stMsg    = tcell.StyleDefault.Bold(true).Foreground(tcell.ColorYellow)
	stProc   = tcell.StyleDefault.Bold(true)
	stHead   = tcell.StyleDefault.Underline(true)
	stSel    = tcell.StyleDefault.Reverse(true)
	stAlloc  = tcell.StyleDefault.Foreground(tcell.ColorOrange)
	stFree   = tcell.StyleDefault.Foreground(tcell.ColorGreen)
	stGrow   = tcell.StyleDefault.Foreground(tcell.ColorRed)
	stShrink = tcell.StyleDefault.Foreground(tcell.ColorBlue)
	stPlain  = tcell.StyleDefault
)

// canvas writes clipped text on a screen.
type canvas struct {
	s    tcell.Screen
	w, h int
}

// put writes str at (x, y), clipped to the screen, and returns the column
// after it.
func (c canvas) put(x, y int, str string, st tcell.Style) int {
	if y < 0 || y >= c.h {
		return x
	}
	// Every string the view draws passes here, names of the traced
	// processes and their functions among them: escaped, a control
	// character is drawn as text rather than sent to the terminal.
	for _, r := range textsafe.String(str) {
		rw := runewidth.RuneWidth(r)
		if rw == 0 {
			rw = 1
		}
		if x+rw > c.w {
			return c.w
		}
		c.s.SetContent(x, y, r, nil, st)
		x += rw
	}
	return x
}

// fill writes str and pads the rest of the line with st (for bars of
// reverse video).
func (c canvas) fill(y int, str string, st tcell.Style) {
	x := c.put(0, y, str, st)
	for ; x < c.w; x++ {
		c.s.SetContent(x, y, ' ', nil, st)
	}
}

// state is what the view draws: the frame and the view's own settings.
type state struct {
	frame    *Frame
	sort     report.SortKey
	paused   bool
	quitting bool
	sel      int
	msg      string
	labels   func(pid uint32, addr uint64) (fn, loc string)
	// The whole host's view (host.go): host, with the allocator panel
	// (heap); the selected process and its row.
	host, heap bool
	pid        uint32
	row        int
}

const helpText = "q quit  s sort  p pause  ←/→ or 1-9 pick half-life  + double  - halve  r reset"

// draw renders st on the whole screen.
func draw(scr tcell.Screen, st *state) {
	scr.Clear()
	w, h := scr.Size()
	c := canvas{scr, w, h}
	y := 0
	title := " memtrace --watch"
	switch {
	case st.quitting:
		title += "  [quitting]"
	case st.paused:
		title += "  [PAUSED]"
	}
	title += "  sort: " + string(st.sort)
	if f := st.frame; f != nil {
		if f.Snap.LostEvents > 0 {
			title += fmt.Sprintf("  LOST EVENTS: %d", f.Snap.LostEvents)
		}
		title += fmt.Sprintf("  period %s  t=%s", f.Settings.Period, seconds(f.Snap.Time))
	}
	c.fill(y, title, stTitle)
	y++
	if st.host {
		c.put(0, y, hostHelp, stHelp)
	} else {
		c.put(0, y, helpText, stHelp)
	}
	y++
	c.put(0, y, st.msg, stMsg)
	y++
	if st.frame == nil {
		c.put(0, y+1, "waiting for the first sample…", stPlain)
		scr.Show()
		return
	}
	if st.host {
		drawHost(c, y, st) // host.go
		scr.Show()
		return
	}
	procs := report.RankProcesses(st.frame.Snap.Processes, st.sort)
	if len(procs) == 0 {
		c.put(0, y+1, "no process traced yet", stPlain)
		scr.Show()
		return
	}
	nhl := len(st.frame.Settings.HalfLives)
	fixed := 6 + nhl // header, rates header, rows, axis, sites title and header, blank
	avail := h - y
	shown := max(1, min(len(procs), avail/(fixed+2)))
	siteRows := max(1, (avail-shown*(fixed+1))/shown)
	for i, p := range procs[:shown] {
		if i > 0 {
			y++
		}
		y = drawProcess(c, y, p, st, siteRows)
		if y >= h {
			break
		}
	}
	if shown < len(procs) && y < h {
		c.put(0, h-1, fmt.Sprintf("… %d more processes (make the terminal taller)", len(procs)-shown), stHelp)
	}
	scr.Show()
}

// drawProcess draws one process from line y and returns the next line.
func drawProcess(c canvas, y int, p aggregate.ProcessSnapshot, st *state, siteRows int) int {
	head := fmt.Sprintf("pid %d %s", p.PID, p.Comm)
	if p.Exited {
		head += " (exited)"
	}
	x := c.put(0, y, head, stProc)
	c.put(x, y, fmt.Sprintf("   live %s, peak %s  allocated %s  freed %s  lost events %d",
		report.HumanBytes(p.Heap.LiveBytes), report.HumanBytes(p.PeakLiveBytes),
		report.HumanBytes(p.Heap.AllocBytes), report.HumanBytes(p.Heap.FreedBytes), p.LostEvents), stPlain)
	y++

	// Rates: one row per half-life, three log-scale bars.
	const labelW = 10
	secW := max(12, (c.w-labelW)/3)
	valW := 11
	barW := max(0, secW-valW-2)
	sections := []struct {
		title string
		value func(r aggregate.RateSnapshot) float64
	}{
		{"allocated/s", func(r aggregate.RateSnapshot) float64 { return r.AllocBytesPerSec }},
		{"freed/s", func(r aggregate.RateSnapshot) float64 { return r.FreedBytesPerSec }},
		{"net/s", func(r aggregate.RateSnapshot) float64 { return r.NetBytesPerSec }},
	}
	c.put(0, y, "half-life", stHead)
	for j, s := range sections {
		c.put(labelW+j*secW, y, s.title+" (log)", stHead)
	}
	y++
	rates := p.Rates
	if len(rates) == 0 {
		for _, h := range st.frame.Settings.HalfLives {
			rates = append(rates, aggregate.RateSnapshot{HalfLife: h})
		}
	}
	for i, r := range rates {
		label := fmt.Sprintf(" %7s ", report.HalfLifeText(r.HalfLife))
		ls := stPlain
		if i == st.sel {
			ls = stSel
		}
		c.put(0, y, label, ls)
		for j, s := range sections {
			v := s.value(r)
			bs := stAlloc
			switch {
			case j == 1:
				bs = stFree
			case j == 2 && v < 0:
				bs = stShrink
			case j == 2:
				bs = stGrow
			}
			x0 := labelW + j*secW
			c.put(x0, y, barString(v, barW), bs)
			c.put(x0+barW+1, y, fmt.Sprintf("%*s", valW, report.RateBytes(v)), stPlain)
		}
		y++
	}
	for j := range sections {
		c.put(labelW+j*secW, y, axis(barW), stHelp)
	}
	y++

	// Top call sites: heap, then anonymous mmap.
	heap := report.TopSites(p.Sites, aggregate.Heap, st.sort, 0)
	mapped := report.TopSites(p.Sites, aggregate.Mapped, st.sort, 0)
	title := fmt.Sprintf(" call sites by %s: %d heap", st.sort.Describe(), len(heap))
	if len(mapped) > 0 {
		title += fmt.Sprintf(", %d anonymous mmap", len(mapped))
	}
	c.put(0, y, title, stHelp)
	y++
	c.put(0, y, fmt.Sprintf(" %10s %12s %12s %10s  %-28s %s", "LIVE", "NET RATE", "ALLOC RATE", "ALLOCATED", "FUNCTION", "LOCATION"), stHead)
	y++
	rows := 0
	for _, group := range [][]aggregate.SiteSnapshot{heap, mapped} {
		for _, s := range group {
			if rows >= siteRows || y >= c.h {
				return y
			}
			fn, loc := st.labels(p.PID, s.Address)
			if s.Category == aggregate.Mapped {
				fn = "[mmap] " + fn
			}
			var net, alloc float64
			if r, ok := shortestRate(s.Rates); ok {
				net, alloc = r.NetBytesPerSec, r.AllocBytesPerSec
			}
			c.put(0, y, fmt.Sprintf(" %10s %12s %12s %10s  %-28s %s",
				report.HumanBytes(s.LiveBytes), report.RateBytes(net)+"/s", report.RateBytes(alloc)+"/s",
				report.HumanBytes(s.AllocBytes), runewidth.Truncate(fn, 28, "…"), loc), stPlain)
			y++
			rows++
		}
	}
	return y
}

func shortestRate(rs []aggregate.RateSnapshot) (aggregate.RateSnapshot, bool) {
	if len(rs) == 0 {
		return aggregate.RateSnapshot{}, false
	}
	best := rs[0]
	for _, r := range rs[1:] {
		if r.HalfLife < best.HalfLife {
			best = r
		}
	}
	return best, true
}

// seconds is a monotonic ns time as "5123.456s".
func seconds(ns uint64) string {
	return strconv.FormatFloat(float64(ns/uint64(time.Millisecond))/1000, 'f', 3, 64) + "s"
}
