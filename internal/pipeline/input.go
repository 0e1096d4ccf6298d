package pipeline

import (
	"io"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// InputKind says what an Input is.
type InputKind uint8

const (
	// InEvent: an allocator call or a mark's event, Event.
	InEvent InputKind = iota + 1
	// InProcess: PID is traced from now on, named Comm.
	InProcess
	// InExited: PID exited at Time.
	InExited
	// InForget: PID's figures end: an exec made them void, or whole-host
	// mode let an exited process go (its final records wait for the next
	// batch of exits, Printer.Forget).
	InForget
	// InLost: PID lost N events so far; InTotalLost: the run did.
	InLost
	InTotalLost
	// InExactCounts: PID made N allocation calls of M bytes (sampled mode).
	InExactCounts
	// InSampleBytes: the sampling mean is N bytes (0: exact).
	InSampleBytes
	// InHalfLives: the rates' half-lives from Time on.
	InHalfLives
	// InTick: a rates period ends at Time.
	InTick
	// InMark: PID marked Label at Time.
	InMark
	// InPeakTolerance: the peak snapshot's tolerance.
	InPeakTolerance
	// InJVMCategories: PID's JVM category names.
	InJVMCategories
	// InCodeMaps: PID's code mappings (a replay's symbols).
	InCodeMaps
	// InStack: the stack StackID is Frames.
	InStack
	// InLeakCheck: a process's leak check, Leak.
	InLeakCheck
	// InFootprint: a reading of PID's memory.
	InFootprint
	// InReport: a report is due, Report.
	InReport
	// InListed: a process the next whole-host report lists though the
	// Table holds no event of it: PID, Comm, its reading (Footprint).
	InListed
	// InAccess: PID's access statistics start, or an epoch ends with its
	// reading (Access; folded by AccessFolder).
	InAccess
	// InJITSymbols: PID's JIT symbols, newer than those before (JIT).
	InJITSymbols
	// InPyFrame: the Python frame PyFrame (a replay's symbols).
	InPyFrame
)

// Input is one input of a run, live or replayed: whatever changes what a
// report shows. A Source gives them in order; Loop.Feed takes each.
type Input struct {
	Kind      InputKind
	PID       uint32
	Time      uint64
	Comm      string
	N, M      uint64
	Event     *event.Event
	HalfLives []time.Duration
	Label     string
	PeakTol   aggregate.PeakTolerance
	Names     []string // InJVMCategories
	Maps      []symbolize.CodeMapping
	StackID   int32
	Frames    []uint64
	PyFrame   symbolize.Frame // InPyFrame
	Leak      *recording.LeakCheck
	Footprint *RecordedFootprint
	Report    recording.Report
	Access    *recording.Access
	JIT       []symbolize.RecordedJIT
}

// Source gives a run's inputs: the live trace (package session: the
// ring's events and the process watcher) or a recording (package replay).
// Run calls feed with each input, in order, until the run ends or feed
// fails.
type Source interface {
	Run(feed func(*Input) error) error
}

// Loop takes a run's inputs into its Table and on to what follows it: the
// table's observer (the recorder) sees every input the table takes, in
// order; Observe sees each input once the table has it (the --html
// history); a report input goes to Report (a live run prints it, a
// replay keeps it for the end).
type Loop struct {
	Table   *aggregate.Table
	Printer *Printer
	// Observe, if set, sees every input after the table took it.
	Observe func(in *Input)
	// Report handles a report input (nil: Printer.Print).
	Report func(r recording.Report) error
	// Other takes the inputs the table does not (code maps, stacks, leak
	// checks, footprint readings); nil: none expected.
	Other func(in *Input) error
	// Mark is the last InMark's mark.
	Mark aggregate.Mark
}

// Feed takes one input.
func (l *Loop) Feed(in *Input) error {
	t := l.Table
	switch in.Kind {
	case InEvent:
		t.Apply(in.Event)
	case InProcess:
		t.AddProcess(in.PID, in.Comm)
	case InExited:
		t.MarkExited(in.PID, in.Time)
	case InForget:
		l.Printer.Forget(in.PID)
	case InLost:
		t.SetLost(in.PID, in.N)
	case InTotalLost:
		t.SetTotalLost(in.N)
	case InExactCounts:
		t.SetExactCounts(in.PID, in.N, in.M)
	case InSampleBytes:
		t.SetSampleBytes(in.N)
	case InHalfLives:
		t.SetHalfLives(in.HalfLives, in.Time)
	case InTick:
		t.Tick(in.Time)
	case InMark:
		l.Mark = t.Mark(in.PID, in.Label, in.Time)
	case InPeakTolerance:
		t.SetPeakTolerance(in.PeakTol)
	case InJVMCategories:
		t.SetJVMCategories(in.PID, in.Names)
	case InReport:
		if l.Report != nil {
			return l.Report(in.Report)
		}
		return l.Printer.Print(in.Report)
	default:
		if l.Other != nil {
			return l.Other(in)
		}
		return nil
	}
	if l.Observe != nil {
		l.Observe(in)
	}
	return nil
}

// RecordingSource is the replay's source: a recording read back, each
// record the input the live run gave its loop (FromRecord). Run returns
// the reader's error (nil at the end record).
type RecordingSource struct{ R *recording.Reader }

func (s *RecordingSource) Run(feed func(*Input) error) error {
	var rec recording.Record
	var in Input
	for {
		err := s.R.Next(&rec)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		FromRecord(&rec, &in)
		if err := feed(&in); err != nil {
			return err
		}
	}
}

// FromRecord is the input a recording's record holds (the recorder
// writes the table's inputs as records: recording.Writer). A record's
// slices are the reader's: valid until its next record.
func FromRecord(rec *recording.Record, in *Input) {
	*in = Input{PID: rec.PID, Time: rec.Time, Comm: rec.Comm, N: rec.N, M: rec.M}
	switch rec.Kind {
	case recording.KindEvent:
		in.Kind, in.Event = InEvent, &rec.Event
	case recording.KindProcess:
		in.Kind = InProcess
	case recording.KindExited:
		in.Kind = InExited
	case recording.KindForgot:
		in.Kind = InForget
	case recording.KindLost:
		in.Kind = InLost
	case recording.KindTotalLost:
		in.Kind = InTotalLost
	case recording.KindSampleBytes:
		in.Kind = InSampleBytes
	case recording.KindExactCounts:
		in.Kind = InExactCounts
	case recording.KindHalfLives:
		in.Kind, in.HalfLives = InHalfLives, rec.HalfLives
	case recording.KindTick:
		in.Kind = InTick
	case recording.KindMark:
		in.Kind, in.PID, in.Label, in.Time = InMark, rec.Mark.PID, rec.Mark.Label, rec.Mark.Time
	case recording.KindPeakTolerance:
		in.Kind, in.PeakTol = InPeakTolerance, rec.PeakTolerance
	case recording.KindMaps:
		in.Kind, in.Maps = InCodeMaps, rec.Maps
	case recording.KindJIT:
		in.Kind, in.JIT = InJITSymbols, rec.JIT
	case recording.KindPyFrame:
		in.Kind, in.PyFrame = InPyFrame, rec.PyFrame
	case recording.KindStack:
		in.Kind, in.StackID, in.Frames = InStack, rec.StackID, rec.Frames
	case recording.KindLeakCheck:
		in.Kind, in.Leak = InLeakCheck, &rec.Leak
	case recording.KindFootprint:
		in.Kind, in.Footprint = InFootprint, &RecordedFootprint{R: rec.Footprint, Ranges: rec.FootprintRanges}
	case recording.KindReport:
		in.Kind, in.Report = InReport, rec.Report
	case recording.KindListed:
		in.Kind, in.Footprint = InListed, &RecordedFootprint{R: rec.Footprint}
	case recording.KindAccess:
		in.Kind, in.PID, in.Time, in.Access = InAccess, rec.PID, rec.Time, &rec.Access
	}
}
