package outfile

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Patient writes to f, a standard stream that memtrace shares with a
// command it started, waiting when the stream is full. A command may make
// the stream's open file non-blocking, for itself and so for memtrace
// (node does so with its stdout when it is a pipe): a write to a full pipe
// then fails with EAGAIN, where memtrace's report must wait for the reader.
func Patient(f *os.File) io.Writer { return patient{f} }

type patient struct{ f *os.File }

// File is the stream itself: a command started with it gets the very file
// (a terminal stays a terminal to it), and a terminal is recognised.
func (p patient) File() *os.File { return p.f }

// Underlying is the *os.File behind w: w itself, or the file a Patient
// writes to.
func Underlying(w io.Writer) (*os.File, bool) {
	switch w := w.(type) {
	case *os.File:
		return w, true
	case interface{ File() *os.File }:
		return w.File(), true
	}
	return nil, false
}

func (p patient) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := p.f.Write(b[done:])
		done += n
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return done, err
		}
		if !p.wait() {
			return done, err
		}
	}
	return done, nil
}

// wait waits until the file takes more bytes. It reaches the descriptor
// through SyscallConn: File.Fd could set it blocking, for the command too.
func (p patient) wait() bool {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		for {
			_, err := unix.Poll(fds, -1)
			if !errors.Is(err, syscall.EINTR) {
				ok = err == nil
				return
			}
		}
	})
	return ok
}
