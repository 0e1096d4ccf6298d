package watch

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/outfile"
)

// While the live view owns the terminal, what memtrace writes to it (a
// target's final records, warnings) is held, and written once the view
// is closed.

// HeldLogs keeps log records made while the view owns the terminal, and
// hands them to their handlers (the session's own format) on release.
type HeldLogs struct {
	mu   sync.Mutex
	held bool
	recs []heldRecord
}

// NewHeldLogs holds records until Release.
func NewHeldLogs() *HeldLogs { return &HeldLogs{held: true} }

type heldRecord struct {
	h slog.Handler
	r slog.Record
}

func (l *HeldLogs) Release() {
	l.mu.Lock()
	recs := l.recs
	l.recs, l.held = nil, false
	l.mu.Unlock()
	for _, hr := range recs {
		hr.h.Handle(context.Background(), hr.r)
	}
}

// HeldHandler is a slog.Handler that holds records in Logs until
// Logs.Release.
type HeldHandler struct {
	Inner slog.Handler
	Logs  *HeldLogs
}

func (h HeldHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return h.Inner.Enabled(ctx, lv)
}

func (h HeldHandler) Handle(ctx context.Context, r slog.Record) error {
	h.Logs.mu.Lock()
	if h.Logs.held {
		h.Logs.recs = append(h.Logs.recs, heldRecord{h.Inner, r.Clone()})
		h.Logs.mu.Unlock()
		return nil
	}
	h.Logs.mu.Unlock()
	return h.Inner.Handle(ctx, r)
}

func (h HeldHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return HeldHandler{h.Inner.WithAttrs(as), h.Logs}
}

func (h HeldHandler) WithGroup(name string) slog.Handler {
	return HeldHandler{h.Inner.WithGroup(name), h.Logs}
}

// HeldWriter keeps what is written while held, and writes it through on
// release.
type HeldWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  bytes.Buffer
	held bool
}

// NewHeldWriter holds what is written to w until Release.
func NewHeldWriter(w io.Writer) *HeldWriter { return &HeldWriter{w: w, held: true} }

func (h *HeldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		return h.buf.Write(p)
	}
	return h.w.Write(p)
}

func (h *HeldWriter) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held = false
		h.w.Write(h.buf.Bytes())
		h.buf.Reset()
	}
}

func IsTerminal(w io.Writer) bool {
	f, ok := outfile.Underlying(w)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Screen is the live view while it owns the terminal: what the run writes
// to its output and its log meanwhile is held, and written once Close
// gives the terminal back.
type Screen struct {
	*View
	out  *HeldWriter
	logs *HeldLogs
	stop chan struct{}
}

// OpenScreen starts the view on the terminal. out is where the run
// writes its reports (held when it is stdout, the terminal); log is its
// logger (held when stderr is a terminal too). It returns where the run
// writes and logs while the view shows; onQuit runs when the user quits.
// On an error nothing is held and out and log stay as they were.
func OpenScreen(o Options, out, stdout, stderr io.Writer, log *slog.Logger, onQuit func()) (*Screen, io.Writer, *slog.Logger, error) {
	held := NewHeldWriter(out)
	logs := NewHeldLogs()
	runOut, runLog := out, log
	if out == stdout {
		runOut = held
	}
	if IsTerminal(stderr) {
		runLog = slog.New(HeldHandler{Inner: log.Handler(), Logs: logs})
	}
	v, err := Start(o)
	if err != nil {
		held.Release()
		logs.Release()
		return nil, out, log, err
	}
	s := &Screen{View: v, out: held, logs: logs, stop: make(chan struct{})}
	go func() {
		for {
			select {
			case <-v.Quit():
				onQuit()
			case <-s.stop:
				return
			}
		}
	}()
	return s, runOut, runLog, nil
}

// Close closes the view, giving the terminal back, then writes what was
// held meanwhile.
func (s *Screen) Close() {
	close(s.stop)
	s.View.Close()
	s.logs.Release()
	s.out.Release()
}
