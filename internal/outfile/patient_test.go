package outfile

import (
	"bytes"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPatientNonblockingPipe: a pipe memtrace opened blocking that another
// process made non-blocking (node, with its stdout) takes a write far
// larger than the pipe holds, all of it, once the reader reads.
func TestPatientNonblockingPipe(t *testing.T) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	if err := unix.SetNonblock(fds[1], true); err != nil { // as the command would
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: 16 pipes' worth
	if _, err := w.Write(want); err == nil {
		t.Fatal("a plain write to the full non-blocking pipe did not fail: the test proves nothing")
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	n, err := Patient(w).Write(want)
	w.Close()
	if err != nil || n != len(want) {
		t.Fatalf("Patient wrote %d of %d bytes: %v", n, len(want), err)
	}
	// The plain write's part came first.
	if b := <-got; !bytes.HasSuffix(b, want) {
		t.Errorf("the reader got %d bytes, not ending with the %d written", len(b), len(want))
	}
}
