// Package watch is memtrace's live view (--watch): a full-screen display,
// refreshed in place like top, of each process's decaying allocation,
// reclamation and net rates as log-scale bars, one row per half-life, and
// of its top call sites. It draws with tcell and knows only snapshots
// (aggregate.Snapshot) and a symbolizer: the session pushes frames to it
// and reads back what the user asked for (quit, other half-lives).
package watch

import (
	"sync"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
)

// Frame is one refresh: a snapshot and the settings its rates were kept
// with.
type Frame struct {
	Snap     aggregate.Snapshot
	Settings Settings
}

// Options configure a View.
type Options struct {
	// Screen to draw on; nil opens the terminal (/dev/tty). Tests pass a
	// tcell.SimulationScreen.
	Screen tcell.Screen
	// Symbolizer names call sites (may be nil).
	Symbolizer report.Symbolizer
	// Sort is the initial order of processes and call sites.
	Sort report.SortKey
	// Configured are the settings from the command line: `r` goes back to
	// them, and an adjusted period stays as close to theirs as it can.
	Configured Settings
	// Host: the whole host's view (host.go), a table of every process;
	// Heap: with the selected process's allocator panel (--heap).
	Host, Heap bool
}

// View is a running live view. Its methods are safe for concurrent use.
type View struct {
	o      Options
	scr    tcell.Screen
	frames chan Frame
	change chan Settings
	quit   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	// do runs functions on the view's goroutine (tests read the screen so).
	do chan func()

	// Owned by the view's goroutine.
	st      state
	latest  *Frame
	cur     Settings
	labels  map[labelKey][2]string
	msgTime time.Time
}

type labelKey struct {
	pid  uint32
	addr uint64
}

// messageFor is how long a message stays on screen.
const messageFor = 5 * time.Second

// Start takes over the screen and runs the view until Close.
func Start(o Options) (*View, error) {
	scr := o.Screen
	if scr == nil {
		var err error
		if scr, err = tcell.NewScreen(); err != nil {
			return nil, err
		}
	}
	if err := scr.Init(); err != nil {
		return nil, err
	}
	if o.Sort == "" {
		o.Sort = report.SortLive
	}
	v := &View{
		o:      o,
		scr:    scr,
		frames: make(chan Frame, 1),
		change: make(chan Settings, 16),
		quit:   make(chan struct{}, 4),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		cur:    o.Configured.clone(),
		labels: map[labelKey][2]string{},
		do:     make(chan func()),
	}
	v.st = state{sort: o.Sort, labels: v.label, host: o.Host, heap: o.Heap}
	if o.Host {
		v.st.sort = report.HostKey(o.Sort)
	}
	go v.run()
	return v, nil
}

// Show hands the view a new frame; it never blocks, and a frame the view
// has not drawn yet is replaced.
func (v *View) Show(f Frame) {
	for {
		select {
		case v.frames <- f:
			return
		default:
		}
		select {
		case <-v.frames:
		default:
		}
	}
}

// Changes delivers the settings the user asked for, already checked
// (Adjust): the session applies them.
func (v *View) Changes() <-chan Settings { return v.change }

// Quit delivers one value each time the user asks to quit (q, Ctrl-C).
func (v *View) Quit() <-chan struct{} { return v.quit }

// Close ends the view and gives the terminal back as it was. It is
// idempotent.
func (v *View) Close() {
	v.once.Do(func() {
		close(v.stop)
		<-v.done
		v.scr.Fini()
	})
}

func (v *View) run() {
	defer close(v.done)
	evs := make(chan tcell.Event, 16)
	go v.scr.ChannelEvents(evs, v.stop)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	v.redraw()
	for {
		select {
		case <-v.stop:
			return
		case f := <-v.frames:
			v.latest = &f
			if !v.st.paused {
				v.st.frame = v.latest
				v.st.sel = min(v.st.sel, max(0, len(f.Settings.HalfLives)-1))
			}
			v.redraw()
		case ev, ok := <-evs:
			if !ok {
				return
			}
			v.handle(ev)
		case f := <-v.do:
			f()
		case <-tick.C:
			if v.st.msg != "" && time.Since(v.msgTime) > messageFor {
				v.st.msg = ""
				v.redraw()
			}
		}
	}
}

func (v *View) redraw() { draw(v.scr, &v.st) }

func (v *View) say(msg string) {
	v.st.msg, v.msgTime = msg, time.Now()
}

// handle acts on one terminal event.
func (v *View) handle(ev tcell.Event) {
	switch ev := ev.(type) {
	case *tcell.EventResize:
		v.scr.Sync()
		v.redraw()
	case *tcell.EventKey:
		v.key(ev)
		v.redraw()
	}
}

func (v *View) key(ev *tcell.EventKey) {
	switch ev.Key() {
	case tcell.KeyCtrlC:
		v.askQuit()
		return
	case tcell.KeyCtrlL:
		v.scr.Sync()
		return
	case tcell.KeyLeft:
		v.pick(v.st.sel - 1)
		return
	case tcell.KeyRight, tcell.KeyTab:
		v.pick(v.st.sel + 1)
		return
	case tcell.KeyUp, tcell.KeyDown:
		if v.st.host {
			d := 1
			if ev.Key() == tcell.KeyUp {
				d = -1
			}
			v.st.moveSelection(d) // host.go
		}
		return
	case tcell.KeyRune:
	default:
		return
	}
	switch r := ev.Rune(); r {
	case 'q', 'Q':
		v.askQuit()
	case 's':
		keys := report.SortKeys()
		if v.st.host {
			keys = report.FootprintKeys()
		}
		for i, k := range keys {
			if k == v.st.sort {
				v.st.sort = keys[(i+1)%len(keys)]
				break
			}
		}
		v.say("sort: " + v.st.sort.Describe())
	case 'p', ' ':
		v.st.paused = !v.st.paused
		if v.st.paused {
			v.say("paused: tracing goes on; p resumes")
		} else {
			v.st.frame = v.latest
			v.say("resumed")
		}
	case '+', '=':
		v.setHalfLife(func(t time.Duration) time.Duration { return 2 * t })
	case '-', '_':
		v.setHalfLife(func(t time.Duration) time.Duration { return t / 2 })
	case 'r':
		i := v.st.sel
		if i < len(v.o.Configured.HalfLives) {
			orig := v.o.Configured.HalfLives[i]
			v.setHalfLife(func(time.Duration) time.Duration { return orig })
		}
	default:
		if r >= '1' && r <= '9' {
			v.pick(int(r - '1'))
		}
	}
}

func (v *View) pick(i int) {
	n := len(v.cur.HalfLives)
	if n == 0 {
		return
	}
	v.st.sel = (i%n + n) % n
	v.say("half-life #" + string(rune('1'+v.st.sel)) + " selected: + doubles, - halves, r resets it")
}

func (v *View) askQuit() {
	v.st.quitting = true
	v.say("quitting…")
	select {
	case v.quit <- struct{}{}:
	default:
	}
}

// setHalfLife changes the selected half-life, adjusting the period or
// refusing (Adjust), and passes accepted settings to the session.
func (v *View) setHalfLife(f func(time.Duration) time.Duration) {
	if v.latest != nil {
		v.cur = v.latest.Settings.clone()
	}
	i := v.st.sel
	if i >= len(v.cur.HalfLives) {
		return
	}
	next, msg, err := Adjust(v.cur, v.o.Configured.Period, i, f(v.cur.HalfLives[i]))
	if err != nil {
		v.say(err.Error())
		return
	}
	v.cur = next
	if v.latest != nil {
		// Shown at once; the session confirms with its next frame.
		v.latest.Settings = next.clone()
	}
	select {
	case v.change <- next:
		v.say(msg + " (averages restart)")
	default:
		v.say("busy: change dropped, try again")
	}
}

// label resolves a call site once and remembers it.
func (v *View) label(pid uint32, addr uint64) (fn, loc string) {
	k := labelKey{pid, addr}
	if l, ok := v.labels[k]; ok {
		return l[0], l[1]
	}
	if len(v.labels) > 1<<14 {
		clear(v.labels)
	}
	fn, loc, _ = report.SiteLabels(v.o.Symbolizer, pid, addr)
	v.labels[k] = [2]string{fn, loc}
	return fn, loc
}
