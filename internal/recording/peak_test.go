package recording

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

// TestPeakHint: the hint follows the zstd stream in a skippable frame;
// ReadPeak finds it at the file's end, and the records read back as
// without it, to their end record.
func TestPeakHint(t *testing.T) {
	for _, hinted := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "run.rec")
		w, err := Create(path, Info{Mode: "pid"})
		if err != nil {
			t.Fatal(err)
		}
		tb := aggregate.NewTable()
		tb.SetObserver(w)
		tb.AddProcess(7, "p")
		tb.Apply(&event.Event{PID: 7, Time: 5, Kind: event.Alloc, Func: event.FuncMalloc, Addr: 0x10, Size: 64, CallSite: 0x401000, StackID: -1})
		want := Peak{PID: 7, Snapshots: 1, Time: 5}
		if hinted {
			w.SetPeak(want)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, ok := ReadPeak(path)
		if ok != hinted || (hinted && got != want) {
			t.Errorf("hinted %v: ReadPeak = %+v, %v", hinted, got, ok)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		kinds := []Kind{}
		for {
			err := r.Next(&rec)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("hinted %v: %v", hinted, err)
			}
			kinds = append(kinds, rec.Kind)
		}
		r.Close()
		if len(kinds) != 2 || kinds[0] != KindProcess || kinds[1] != KindEvent {
			t.Errorf("hinted %v: records %v, want a process and an event", hinted, kinds)
		}
	}
}
