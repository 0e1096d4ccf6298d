package replay

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/folded"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

// TestReplayHostExited: replaying a whole-host recording folds into
// --folded the processes forgotten at their exit (by comm), not one
// forgotten at its exec, and only those exited by --at.
func TestReplayHostExited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.rec")
	const start = uint64(1000e9)
	w, err := recording.Create(path, recording.Info{StartNS: start, Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	tb := aggregate.NewTable()
	tb.SetObserver(w)
	alloc := func(pid uint32, s, size uint64) {
		tb.Apply(&event.Event{PID: pid, Time: start + s*1e9, Kind: event.Alloc, Func: event.FuncMalloc,
			Addr: 0x1000 * s, Size: size, CallSite: 0x401001, StackID: -1})
	}
	exit := func(pid uint32, s uint64) { // as session.hostExit
		tb.MarkExited(pid, start+s*1e9)
		tb.Forget(pid)
	}
	tb.AddProcess(1, "cc")
	alloc(1, 1, 100)
	exit(1, 1)
	tb.AddProcess(2, "cc")
	alloc(2, 2, 100)
	exit(2, 2)
	tb.AddProcess(3, "sh")
	alloc(3, 3, 50)
	tb.Forget(3) // it executed cc2 (session.hostExec): sh's figures are void
	tb.AddProcess(3, "cc2")
	alloc(3, 3, 7)
	tb.AddProcess(4, "cc")
	alloc(4, 4, 100)
	exit(4, 4)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ at, want string }{
		{"", "cc (exited);0x401000 300\ncc2 (3);0x401000 7\n"},
		{"3.5s", "cc (exited);0x401000 200\ncc2 (3);0x401000 7\n"},
		{"1.5s", "0x401000 100\n"}, // one profile: no prefix
	} {
		at, err := ParseAt(tc.at)
		if err != nil {
			t.Fatal(err)
		}
		c := &ReplayConfig{File: path, At: at, ExportFiles: pipeline.ExportFiles{
			FoldedFile: filepath.Join(t.TempDir(), "f.folded"), FoldedValue: folded.Allocated}}
		rp, err := replay(c, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := rp.writeExports(c); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(c.FoldedFile)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("--at %q:\n%s\nwant:\n%s", tc.at, b, tc.want)
		}
	}
}
