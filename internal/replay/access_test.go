package replay

import (
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

// TestReplayAccess: a recording's access readings fold, in replay, into
// the epochs the live run folded them into, each with the blocks live at
// its record (a block freed between two epochs is in the first only),
// and --at stops before the epochs after it.
func TestReplayAccess(t *testing.T) {
	const page, start = 4096, uint64(1000e9)
	path := filepath.Join(t.TempDir(), "access.rec")
	w, err := recording.Create(path, recording.Info{StartNS: start, Mode: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tb := aggregate.NewTable()
	tb.SetObserver(w)
	tb.AddProcess(9, "app")
	alloc := func(addr, size, site uint64, now uint64) {
		tb.Apply(&event.Event{PID: 9, Time: now, Kind: event.Alloc, Func: event.FuncMalloc, Addr: addr, Size: size, CallSite: site, StackID: -1})
	}
	alloc(0x10000, 4*page, 0x401000, start+1)
	alloc(0x20000, 2*page, 0x402000, start+2)
	live := access.NewTracker(page, 2, start+3)
	w.Access(&recording.Access{PID: 9, Time: start + 3, Start: true, ColdAfter: 2, PageSize: page})
	var want []access.Epoch
	epoch := func(now uint64, pages []access.Page, final bool) {
		runs := access.Runs{PageSize: page, Runs: []access.Run{{Start: 0x10000, Pages: pages}}}
		w.Access(&recording.Access{PID: 9, Time: now, Final: final, Comm: "app", Method: "pagemap+pte-walk", Pages: runs})
		want = append(want, live.End(now, pipeline.AccessBlocks(tb, 9), &runs, false, "pagemap+pte-walk"))
	}
	const p, a = access.Present, access.Present | access.Accessed
	pages := func(bits ...access.Page) []access.Page {
		out := make([]access.Page, 18) // 0x10000 to 0x22000
		copy(out, bits)
		return out
	}
	epoch(start+1e9, pages(a, a, p, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, p), false)
	tb.Apply(&event.Event{PID: 9, Time: start + 1e9 + 1, Kind: event.Free, Func: event.FuncFree, Addr: 0x20000})
	epoch(start+2e9, pages(a, p, p, 0), false)
	epoch(start+3e9, pages(p, p, p, 0), true)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want[0].Sites) != 2 || len(want[1].Sites) != 1 || want[2].Process.Cold != 2*page {
		t.Fatalf("the live epochs are not what the test means: %+v", want)
	}
	for _, tc := range []struct {
		at   string
		want access.Epoch
	}{
		{"", want[2]},
		{"2.5s", want[1]},
		{"1.5s", want[0]},
	} {
		at, err := ParseAt(tc.at)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := replay(&ReplayConfig{File: path, At: at}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		got := rp.accessLast[9]
		if !reflect.DeepEqual(got.e, tc.want) || got.comm != "app" {
			t.Errorf("--at %q: epoch %+v of %q\nwant %+v", tc.at, got.e, got.comm, tc.want)
		}
		if tc.at == "" {
			var epochs []access.Epoch
			for _, s := range rp.stream {
				epochs = append(epochs, s.e)
			}
			if !reflect.DeepEqual(epochs, want) || !rp.stream[2].final || rp.stream[1].final {
				t.Errorf("the stream's epochs %+v\nwant %+v", rp.stream, want)
			}
		}
	}
}
