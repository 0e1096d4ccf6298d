package session

import (
	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/recording"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/symbolize"
)

// printer writes a run's reports from its Table, live or replayed: each
// report's snapshot is built here and nowhere else, from the inputs the
// Table was given up to then. A live run writes each report's moment into
// its recording (recording.Report), and a replay prints the same report
// at the same point of the stream, so it prints what the live run printed.
type printer struct {
	table *aggregate.Table
	res   *symbolize.Resolver
	w     report.Outputs
	// base: the options every report shares (Top, Sort, Raw, Host,
	// Kernel, Attach, the --detail stacks).
	base  report.Options
	leaks *report.Leaks // nil without a leak check
	rec   *recording.Writer
	// exits: whole-host mode's final snapshots of the processes that
	// exited and were forgotten since the last batch (forget).
	exits     []aggregate.ProcessSnapshot
	exitMarks []aggregate.Mark
	exitPIDs  []int
	// holdExits: forget holds exited processes (whole-host mode).
	holdExits bool
	// footprints gives a snapshot's processes their footprint readings
	// (fresh ones for a final report); nil: none. A live run reads them
	// (footprint.go), a replay takes the recorded ones.
	footprints func(snap *aggregate.Snapshot, fresh bool)
}

// forget drops pid from the Table. A process that exited keeps its final
// snapshot for the next batch of exits (whole-host mode forgets each
// process at its exit, so that memory stays bounded); one forgotten at
// an exec is void.
func (p *printer) forget(pid uint32) {
	if !p.holdExits {
		p.table.Forget(pid)
		return
	}
	snap := p.table.SnapshotOf(pid)
	if p.holdExits && len(snap.Processes) == 1 && snap.Processes[0].Exited {
		p.decorate(&snap, false) // its memory is gone: its latest reading
		p.exits = append(p.exits, snap.Processes...)
		p.exitMarks = append(p.exitMarks, snap.Marks...)
		p.exitPIDs = append(p.exitPIDs, int(pid))
	}
	p.table.Forget(pid)
}

// print writes the report r asks for, and records its moment.
func (p *printer) print(r recording.Report) error {
	if p.rec != nil {
		p.rec.Report(&r)
	}
	return p.write(r, p.snapshot(r))
}

// snapshot is the snapshot report r shows: the processes it names (all
// of them, or a whole-host batch of exits), with their footprints.
func (p *printer) snapshot(r recording.Report) aggregate.Snapshot {
	snap := p.bare(r)
	if !r.Exited { // a batch's were taken as each was forgotten
		p.decorate(&snap, r.Final)
	}
	return snap
}

func (p *printer) decorate(snap *aggregate.Snapshot, fresh bool) {
	if p.footprints != nil {
		p.footprints(snap, fresh)
	}
}

// bare is snapshot without the footprint readings.
func (p *printer) bare(r recording.Report) aggregate.Snapshot {
	if r.Exited {
		snap := aggregate.Snapshot{Time: r.Time, Processes: p.exits, SampleBytes: p.table.SampleBytes(),
			Marks: p.exitMarks, LostEvents: p.table.TotalLost()}
		p.exits, p.exitMarks, p.exitPIDs = nil, nil, nil
		return snap
	}
	snap := p.table.Snapshot()
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

// write writes report r of snap: text or NDJSON, and what the leak check
// adds. A batch of exits is its processes' final records alone.
func (p *printer) write(r recording.Report, snap aggregate.Snapshot) error {
	o := p.base
	o.Final = r.Final
	if !r.Exited {
		return report.Write(p.w, snap, p.res, o, p.leaks)
	}
	o.Exited, o.Kernel, o.Attach = true, "", ""
	if p.w.JSON {
		return report.WriteJSON(p.w.Out, snap, p.res, o)
	}
	return report.WriteText(p.w.Out, snap, p.res, o)
}

// held are the PIDs of the processes the next batch of exits shows.
func (p *printer) held() []int { return p.exitPIDs }
