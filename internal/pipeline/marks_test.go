package pipeline

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/memtrace/memtrace/internal/event"
)

// TestMarkLabel: the probe's string; else the one at the argument's
// address, read from the process; else, not printable, the function's name.
func TestMarkLabel(t *testing.T) {
	marks := []string{"phase", "tick"}
	buf := []byte("loaded\x00")
	self := uint32(os.Getpid())
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	for _, tc := range []struct {
		e    event.Event
		want string
	}{
		{event.Event{PID: self, Label: "ready", Size: 1}, "ready"},
		{event.Event{PID: self, Addr: addr, Size: 0}, "loaded"},
		{event.Event{PID: self, Label: "\x01\x02", Size: 1}, "tick"},
		{event.Event{PID: self, Size: 5}, ""},
	} {
		if got := MarkLabel(&tc.e, marks); got != tc.want {
			t.Errorf("MarkLabel(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
	runtime.KeepAlive(buf)
}
