package pipeline

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/recording"
)

// TestLoopRecordReplay: inputs of every table kind fed through a Loop
// whose table is recorded, read back as inputs (FromRecord) and fed
// through a new Loop, give the same table; reports reach Report at the
// same points; Observe sees each table input once (a report is none).
func TestLoopRecordReplay(t *testing.T) {
	var buf bytes.Buffer
	w, err := recording.NewWriter(&buf, recording.Info{Mode: "pid"})
	if err != nil {
		t.Fatal(err)
	}
	live := aggregate.NewTable()
	live.SetObserver(w)
	var liveReports []recording.Report
	observed := 0
	pr := &Printer{Table: live, Rec: w}
	l := &Loop{Table: live, Printer: pr, Observe: func(*Input) { observed++ },
		Report: func(r recording.Report) error {
			w.Report(&r) // what Printer.Print records
			liveReports = append(liveReports, r)
			return nil
		}}
	ev := func(pid uint32, kind event.Kind, addr, size, now uint64) Input {
		return Input{Kind: InEvent, Event: &event.Event{PID: pid, Time: now, Kind: kind, Func: event.FuncMalloc, Addr: addr,
			Size: size, CallSite: 0x401000 + addr%3, StackID: -1}}
	}
	inputs := []Input{
		{Kind: InPeakTolerance, PeakTol: aggregate.PeakTolerance{Bytes: 8}},
		{Kind: InSampleBytes, N: 0},
		{Kind: InHalfLives, HalfLives: []time.Duration{time.Second}, Time: 1e9},
		{Kind: InProcess, PID: 1, Comm: "one"},
		{Kind: InProcess, PID: 2, Comm: "two"},
		ev(1, event.Alloc, 0x10, 100, 2e9),
		ev(2, event.Alloc, 0x20, 50, 2e9),
		ev(1, event.Alloc, 0x30, 70, 3e9),
		{Kind: InMark, PID: 1, Label: "half", Time: 3e9},
		{Kind: InTick, Time: 3e9},
		ev(1, event.Free, 0x10, 0, 4e9),
		{Kind: InLost, PID: 2, N: 3},
		{Kind: InTotalLost, N: 3},
		{Kind: InExactCounts, PID: 1, N: 5, M: 500},
		{Kind: InReport, Report: recording.Report{Time: 4e9, All: true}},
		{Kind: InExited, PID: 2, Time: 5e9},
		{Kind: InReport, Report: recording.Report{Time: 5e9, Final: true, PIDs: []uint32{2}}},
		{Kind: InForget, PID: 2},
		{Kind: InTick, Time: 6e9},
		{Kind: InReport, Report: recording.Report{Time: 6e9, Final: true, All: true}},
	}
	for i := range inputs {
		if err := l.Feed(&inputs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if observed != len(inputs)-3 { // not the reports
		t.Errorf("observed %d inputs, want %d", observed, len(inputs)-3)
	}

	r, err := recording.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	replayed := aggregate.NewTable()
	var reports []recording.Report
	l2 := &Loop{Table: replayed, Printer: &Printer{Table: replayed}, Report: func(r recording.Report) error {
		reports = append(reports, r)
		return nil
	}}
	if err := (&RecordingSource{R: r}).Run(func(in *Input) error {
		if in.Kind == 0 {
			t.Fatalf("a record has no input")
		}
		return l2.Feed(in)
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := replayed.Snapshot(), live.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("replayed table:\n%+v\nlive:\n%+v", got, want)
	}
	if !reflect.DeepEqual(reports, liveReports) {
		t.Errorf("replayed reports %+v, live %+v", reports, liveReports)
	}
}
