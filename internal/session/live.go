package session

import (
	"os"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/watch"
)

// watchRefresh is how often --watch redraws (or prints a report when
// stdout is not a terminal) unless -i says otherwise.
const watchRefresh = time.Second

// liveRates drives the decaying rates, a Table.Tick every period, and with
// --watch on a terminal the live view. The session's goroutine calls all
// its methods; the view runs in its own goroutine and only gets snapshots.
type liveRates struct {
	s        *session
	ticker   *time.Ticker
	tick     <-chan time.Time
	settings watch.Settings

	// With the view only:
	view      *watch.Screen
	changes   <-chan watch.Settings
	refresh   time.Duration
	lastFrame time.Time
}

// startLive starts the rates' clock and ticker and, with --watch on a
// terminal, the view: q in the view arrives on sigs as a SIGTERM would, so
// it ends the run as that signal does (the final report is printed as
// usual, once the terminal is restored). Without a terminal --watch means
// periodic plain reports. Call it before the interval ticker is made.
func (s *session) startLive(sigs chan<- os.Signal) *liveRates {
	l := &liveRates{s: s, settings: watch.Settings{HalfLives: s.cfg.HalfLives, Period: s.cfg.Period}}
	s.feed(pipeline.Input{Kind: pipeline.InHalfLives, HalfLives: s.cfg.HalfLives, Time: monotonicNow()})
	l.ticker = time.NewTicker(s.cfg.Period)
	l.tick = l.ticker.C
	if !s.cfg.Watch {
		return l
	}
	if !watch.IsTerminal(s.stdout) {
		if s.cfg.Interval == 0 {
			s.cfg.Interval = watchRefresh
		}
		return l
	}
	l.refresh = watchRefresh
	if s.cfg.Interval > 0 {
		l.refresh = s.cfg.Interval
	}
	// Output written while the view owns the screen (a -p target's final
	// records, warnings) waits until the view is closed (watch.Screen);
	// q in the view ends the run as SIGTERM does.
	screen, out, log, err := watch.OpenScreen(watch.Options{Symbolizer: s.res, Sort: s.cfg.Sort, Configured: l.settings,
		Host: s.host != nil, Heap: s.cfg.Heap},
		s.out, s.stdoutText, s.stderr, s.log, func() {
			select {
			case sigs <- syscall.SIGTERM:
			default:
			}
		})
	if err != nil {
		s.log.Warn("--watch: no live view (it needs a terminal: run memtrace in one, or in tmux); printing periodic reports instead", "err", err)
		if s.cfg.Interval == 0 {
			s.cfg.Interval = watchRefresh
		}
		return l
	}
	s.out, s.log = out, log
	s.cfg.Interval = 0 // the view replaces periodic reports
	l.view, l.changes = screen, screen.Changes()
	l.push()
	return l
}

// onTick ends a sampling period: everything the probes wrote so far is
// applied, then the rates move on; the view gets a frame every refresh.
func (l *liveRates) onTick(time.Time) {
	if _, err := l.s.drain.Poll(0, l.s.apply); err != nil {
		l.s.log.Warn("drain", "err", err)
	}
	now := monotonicNow()
	l.s.feed(pipeline.Input{Kind: pipeline.InTick, Time: now})
	l.s.exportTick(now) // exports.go: the history's point at the tick's time, as a replay has it
	if l.view != nil && time.Since(l.lastFrame) >= l.refresh {
		l.push()
	}
}

// push sends the view a snapshot.
func (l *liveRates) push() {
	l.s.refreshCounts()
	l.lastFrame = time.Now()
	snap := l.s.snapshotAt(monotonicNow(), false)
	if l.s.host != nil {
		l.s.addOthers(&snap, false) // every process on the host (hostlist.go)
	}
	l.view.Show(watch.Frame{Snap: snap, Settings: l.settings})
}

// apply takes half-lives and a period the user chose in the view (already
// checked by watch.Adjust): changed half-lives restart their averages.
func (l *liveRates) apply(st watch.Settings) {
	l.s.feed(pipeline.Input{Kind: pipeline.InHalfLives, HalfLives: st.HalfLives, Time: monotonicNow()})
	if st.Period != l.settings.Period {
		l.ticker.Reset(st.Period)
	}
	l.settings = st
	if l.view != nil {
		l.push()
	}
}

// stop closes the view, giving the terminal back, then writes what was
// held meanwhile (the final report). Safe to call more than once.
func (l *liveRates) stop() {
	if l == nil {
		return
	}
	l.ticker.Stop()
	if l.view != nil {
		l.view.Close()
		l.view = nil
	}
}
