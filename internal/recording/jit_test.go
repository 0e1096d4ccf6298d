package recording

import (
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// TestJITRecords: each flush writes the JIT symbols read since the last
// one, per process with code mappings, and they read back in order.
func TestJITRecords(t *testing.T) {
	all := map[int][]symbolize.RecordedJIT{
		7: {{Start: 0x1000, Size: 0x40, Name: "JS:*f a.js:1:1", File: "/tmp/perf-7.map"},
			{Start: 0x1040, Size: 0x20, Name: "LazyCompile:g", File: "/tmp/perf-7.map"},
			{Start: 0x1000, Size: 0x10, Name: "newer", File: "/tmp/jit-7.dump"}},
	}
	have := 2 // the symbols read at the first flush
	r := written(t, "pid", func(w *Writer) {
		w.SetMaps(func(pid int) []symbolize.CodeMapping {
			return []symbolize.CodeMapping{{Start: 1, End: 2, Path: "/bin/x"}}
		})
		w.SetJIT(func(pid, from int) ([]symbolize.RecordedJIT, int) {
			syms := all[pid][:have]
			return syms[min(from, len(syms)):], len(syms)
		})
		w.MapsChanged(7)
		w.Process(7, "node")
		w.writeJIT()
		w.writeJIT() // nothing new: no record
		have = 3
	})
	var got [][]symbolize.RecordedJIT
	var rec Record
	for r.Next(&rec) == nil {
		if rec.Kind == KindJIT {
			if rec.PID != 7 {
				t.Errorf("JIT record of pid %d, want 7", rec.PID)
			}
			got = append(got, rec.JIT)
		}
	}
	want := [][]symbolize.RecordedJIT{all[7][:2], all[7][2:]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JIT records %+v, want %+v", got, want)
	}
}
