package recording

import (
	"bytes"
	"io"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// TestPythonFrames: a Python call site's frame (its function, file and
// line) is written once, before the first event charged to it, whatever
// record the event takes (pymalloc's functions have no compact one), and
// is read back as the frame the address stands for.
func TestPythonFrames(t *testing.T) {
	line := symbolize.PythonBase | 6
	frame := symbolize.Frame{Address: line, CallAddress: line, Function: "load_rows", File: "/srv/app.py", Line: 17,
		Module: "python", Python: true}
	var b bytes.Buffer
	w, err := NewWriter(&b, Info{})
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	w.SetPython(func(addr uint64) (symbolize.Frame, bool) {
		asked++
		return frame, addr == line
	})
	for i, fn := range []event.Func{event.FuncPyMalloc, event.FuncMalloc, event.FuncPyMalloc} {
		w.Event(&event.Event{Kind: event.Alloc, Func: fn, Addr: 0x1000 + uint64(i)*64, Size: 32, CallSite: line,
			Leaf: 0x401000, PID: 7, TID: 7, StackID: -1})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	var got []symbolize.Frame
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == KindPyFrame {
			got = append(got, rec.PyFrame)
		}
	}
	if len(got) != 1 || got[0].Address != frame.Address || got[0].Function != frame.Function ||
		got[0].File != frame.File || got[0].Line != frame.Line || !got[0].Python || got[0].Module != "python" {
		t.Errorf("read %+v, want one %+v", got, frame)
	}
	if asked != 1 {
		t.Errorf("the frame was asked for %d times, want 1", asked)
	}
}
