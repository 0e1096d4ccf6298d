package diff

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// fakeSym names the sites at 0x1000 and 0x2000 in /bin/app; anything
// else stays unresolved.
type fakeSym struct{}

func (fakeSym) Resolve(pid int, ret uint64) symbolize.Frame {
	switch ret {
	case 0x1000:
		return symbolize.Frame{Address: ret, Function: "f", File: "a.c", Line: 3, Module: "/bin/app", Offset: 0x100}
	case 0x2000:
		return symbolize.Frame{Address: ret, Function: "g", File: "b.c", Line: 7, Module: "/bin/app", Offset: 0x200}
	}
	return symbolize.Frame{Address: ret}
}

// TestFromSnapshotEqualsNDJSON: a snapshot compared as data gives the
// side its final NDJSON report gives, which diff read before.
func TestFromSnapshotEqualsNDJSON(t *testing.T) {
	tb := aggregate.NewTable()
	tb.AddProcess(10, "app")
	tb.AddProcess(11, "app")
	tb.AddProcess(12, "other")
	for i, e := range []event.Event{
		{PID: 10, Kind: event.Alloc, Func: event.FuncMalloc, Addr: 0xa0, Size: 100, CallSite: 0x1000},
		{PID: 10, Kind: event.Alloc, Func: event.FuncMalloc, Addr: 0xb0, Size: 50, CallSite: 0x2000},
		{PID: 10, Kind: event.Free, Func: event.FuncFree, Addr: 0xb0},
		{PID: 11, Kind: event.Alloc, Func: event.FuncMalloc, Addr: 0xa0, Size: 30, CallSite: 0x1000},
		{PID: 12, Kind: event.Alloc, Func: event.FuncMalloc, Addr: 0xc0, Size: 8, CallSite: 0x3000},
		{PID: 12, Kind: event.Mmap, Func: event.FuncMmap, Addr: 0x7000, Size: 8192, CallSite: 0x2000},
	} {
		e.Time, e.StackID = uint64(i+1), -1
		tb.Apply(&e)
	}
	snap := tb.Snapshot()
	var b bytes.Buffer
	if err := report.WriteJSON(&b, snap, fakeSym{}, report.Options{Final: true}); err != nil {
		t.Fatal(err)
	}
	want, err := ReadNDJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	got := FromSnapshot(snap, fakeSym{})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from the snapshot:\n%+v\nfrom its NDJSON:\n%+v", got, want)
	}
	f := SiteKey{Comm: "app", Category: "heap", Module: "app", Function: "f", File: "a.c", Line: 3, Offset: "0x100"}
	if s := got.Sites[f]; s.LiveBytes != 130 || s.Allocs != 2 || s.LiveAllocs != 2 {
		t.Errorf("f in app's two processes: %+v", s)
	}
	if p := got.Processes["app"]; p.LiveBytes != 130 || p.Frees != 1 || p.FreedBytes != 50 || p.PeakLiveBytes != 150+30 {
		t.Errorf("app: %+v", p)
	}
	if len(got.Sites) != 4 {
		t.Errorf("%d sites, want 4: %+v", len(got.Sites), got.Sites)
	}
}
