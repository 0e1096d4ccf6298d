package pipeline

import (
	"cmp"
	"strings"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// Printer writes a run's reports from its Table, live or replayed: each
// report's snapshot is built here and nowhere else, from the inputs the
// Table was given up to then. A live run writes each report's moment into
// its recording (recording.Report), and a replay prints the same report
// at the same point of the stream, so it prints what the live run printed.
type Printer struct {
	Table *aggregate.Table
	Res   *symbolize.Resolver
	W     report.Outputs
	// Base: the options every report shares (Top, Sort, Raw, Host,
	// Kernel, Attach, the --detail stacks).
	Base  report.Options
	Leaks *report.Leaks     // nil without a leak check
	Rec   *recording.Writer // nil without --record
	// HoldExits: Forget holds exited processes (whole-host mode).
	HoldExits bool
	// Footprints gives a snapshot's processes their footprint readings
	// (fresh ones for a final report); nil: none. A live run reads them,
	// a replay takes the recorded ones.
	Footprints func(snap *aggregate.Snapshot, fresh bool)
	// Others adds to a whole host's report the processes the Table does
	// not hold (no event of theirs met), each with a footprint reading
	// (fresh ones for a final report); nil: none (a replay: the recording
	// has no readings of them).
	Others func(snap *aggregate.Snapshot, fresh bool)

	// exits: whole-host mode's final snapshots of the processes that
	// exited and were forgotten since the last batch (Forget).
	exits     []aggregate.ProcessSnapshot
	exitMarks []aggregate.Mark
	exitPIDs  []int
}

// Forget drops pid from the Table. A process that exited keeps its final
// snapshot for the next batch of exits (whole-host mode forgets each
// process at its exit, so that memory stays bounded); one forgotten at
// an exec is void.
func (p *Printer) Forget(pid uint32) {
	if !p.HoldExits {
		p.Table.Forget(pid)
		return
	}
	snap := p.Table.SnapshotOf(pid)
	if len(snap.Processes) == 1 && snap.Processes[0].Exited {
		p.decorate(&snap, false) // its memory is gone: its latest reading
		p.exits = append(p.exits, snap.Processes...)
		p.exitMarks = append(p.exitMarks, snap.Marks...)
		p.exitPIDs = append(p.exitPIDs, int(pid))
	}
	p.Table.Forget(pid)
}

// Print writes the report r asks for, and records its moment.
func (p *Printer) Print(r recording.Report) error {
	snap := p.Snapshot(r)
	if p.Others != nil && r.All && !r.Exited {
		p.Others(&snap, r.Final)
		if p.Rec != nil { // before the report, as a replay needs them (Listed)
			for _, proc := range snap.Processes {
				if proc.Untraced && proc.Footprint != nil {
					p.Rec.Listed(proc.PID, proc.Comm, r.Time, *proc.Footprint)
				}
			}
		}
	}
	if p.Rec != nil {
		// After the snapshot: the footprint readings it took are
		// recorded first, as a replay needs them for this report.
		p.Rec.Report(&r)
	}
	return p.Write(r, snap)
}

// Snapshot is the snapshot report r shows: the processes it names (all
// of them, or a whole-host batch of exits), with their footprints.
func (p *Printer) Snapshot(r recording.Report) aggregate.Snapshot {
	snap := p.Bare(r)
	if !r.Exited { // a batch's were taken as each was forgotten
		p.decorate(&snap, r.Final)
	}
	return snap
}

func (p *Printer) decorate(snap *aggregate.Snapshot, fresh bool) {
	if p.Footprints != nil {
		p.Footprints(snap, fresh)
	}
}

// Bare is Snapshot without the footprint readings.
func (p *Printer) Bare(r recording.Report) aggregate.Snapshot {
	if r.Exited {
		// As of the newest event, the exits included, as every report
		// (docs/json.md): "now" put a batch after the final report.
		snap := aggregate.Snapshot{Time: cmp.Or(p.Table.Newest(), r.Time), Processes: p.exits, SampleBytes: p.Table.SampleBytes(),
			Marks: p.exitMarks, LostEvents: p.Table.TotalLost()}
		p.exits, p.exitMarks, p.exitPIDs = nil, nil, nil
		return snap
	}
	snap := p.Table.Snapshot()
	if snap.Time == 0 {
		snap.Time = r.Time // no event yet: the report is as of now, not of t=0
	}
	if !r.All {
		keep := map[uint32]bool{}
		for _, pid := range r.PIDs {
			keep[pid] = true
		}
		var ps []aggregate.ProcessSnapshot
		for _, proc := range snap.Processes {
			if keep[proc.PID] {
				ps = append(ps, proc)
			}
		}
		snap.Processes = ps
	}
	return snap
}

// Write writes report r of snap: text or NDJSON, and what the leak check
// adds. A batch of exits is its processes' final records alone.
func (p *Printer) Write(r recording.Report, snap aggregate.Snapshot) error {
	o := p.Base
	o.Final = r.Final
	if !r.Exited {
		return report.Write(p.W, snap, p.Res, o, p.Leaks)
	}
	o.Exited = true
	if p.W.JSON {
		return report.WriteJSON(p.W.Out, snap, p.Res, o)
	}
	return report.WriteText(p.W.Out, snap, p.Res, o)
}

// Listed is the process a recording's InListed input names, as the
// report after it lists it.
func Listed(in *Input) aggregate.ProcessSnapshot {
	r := in.Footprint.R
	return aggregate.ProcessSnapshot{PID: in.PID, Comm: strings.Clone(in.Comm), Untraced: true, Footprint: &r}
}

// Held are the PIDs and final snapshots of the processes the next batch
// of exits shows.
func (p *Printer) Held() ([]int, []aggregate.ProcessSnapshot) { return p.exitPIDs, p.exits }
