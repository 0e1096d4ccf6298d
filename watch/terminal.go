package watch

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
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
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
