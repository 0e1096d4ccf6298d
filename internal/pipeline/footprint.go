package pipeline

import (
	"log/slog"
	"slices"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
)

// WithFootprints attaches recorded readings (pid -> latest, as a replay has them) to
// a replayed snapshot.
func WithFootprints(snap *aggregate.Snapshot, recorded map[uint32]RecordedFootprint) {
	for i := range snap.Processes {
		p := &snap.Processes[i]
		if rf, ok := recorded[p.PID]; ok {
			p.SetFootprint(Aligned(rf.R, rf.Ranges, p.Regions))
		}
	}
}

// Aligned is r, read with ranges, for the regions of a later snapshot:
// each region gets the state of the range it equals (a region made or
// cut since the reading has none).
func Aligned(r footprint.Reading, ranges, regions []footprint.Range) footprint.Reading {
	if slices.Equal(ranges, regions) {
		return r
	}
	byRange := make(map[footprint.Range]footprint.State, len(ranges))
	for j, g := range ranges {
		if j < len(r.Ranges) {
			byRange[g] = r.Ranges[j]
		}
	}
	states := make([]footprint.State, len(regions))
	for j, g := range regions {
		states[j] = byRange[g]
	}
	r.Ranges = states
	return r
}

// RecordedFootprint is a footprint record: the reading and its ranges.
type RecordedFootprint struct {
	R      footprint.Reading
	Ranges []footprint.Range
}

// FootprintEvery is how often the --html timeline gets a footprint
// reading; reports and --listen's refreshes take their own.
const FootprintEvery = time.Second

// footprintDuty bounds what readings cost: a process is read again only
// once footprintDuty times its last reading's duration has passed (the
// latest reading stands in meanwhile), so readings take at most 1% of a
// core per process, however many mappings or resident pages it has. The
// final report always reads afresh.
const footprintDuty = 100

// FootprintPacer reads the live run's processes' footprints, paced by
// footprintDuty, and keeps the readings taken at exit stops.
type FootprintPacer struct {
	// Options says what a reading of pid needs (footprint.Options).
	Options func(pid int, regions []footprint.Range) footprint.Options
	// Attached says whether memtrace traced pid from its start's view
	// (footprint.Reading.Attached).
	Attached func(pid int) bool
	// Record gets each fresh reading, for the --record file (may be nil).
	Record func(pid int, r footprint.Reading, regions []footprint.Range)
	Log    *slog.Logger

	exit map[int]footprint.Reading
	last map[int]lastReading
}

// lastReading is a process's latest footprint and the regions it split.
type lastReading struct {
	r       footprint.Reading
	regions []footprint.Range
	at      time.Time     // when it was taken
	took    time.Duration // how long it took
	memory  uint64        // the process's memory as traced then (tracedMemory)
	// due: a reading Read asked for was put off by footprintDuty;
	// ReadChanged takes it as soon as the duty allows, not a period later.
	due bool
}

// Read gives every process of snap a footprint reading: a fresh one while
// it runs (or, within footprintDuty of the last, that one), the one taken
// at its exit stop once it has exited, else its latest. A process that
// cannot be read (it just exited, a zombie) keeps its latest reading, if
// any, and says so at debug level.
func (f *FootprintPacer) Read(snap *aggregate.Snapshot, fresh bool) {
	for i := range snap.Processes {
		p := &snap.Processes[i]
		pid := int(p.PID)
		if r, ok := f.exit[pid]; ok {
			p.SetFootprint(r)
			continue
		}
		last, ok := f.last[pid]
		if p.Exited {
			f.latest(p)
			continue
		}
		if ok && !fresh && time.Since(last.at) < footprintDuty*last.took {
			last.due = true
			f.last[pid] = last
			f.latest(p)
			continue
		}
		start := time.Now()
		r, err := footprint.Read(pid, f.Options(pid, p.Regions))
		if err != nil {
			f.Log.Debug("footprint", "pid", pid, "err", err)
			f.latest(p)
			continue
		}
		f.readNow(p, start, r)
	}
}

// readNow keeps p's fresh reading r, taken from start.
func (f *FootprintPacer) readNow(p *aggregate.ProcessSnapshot, start time.Time, r footprint.Reading) {
	pid := int(p.PID)
	r.Attached = f.Attached(pid)
	p.SetFootprint(r)
	if f.last == nil {
		f.last = map[int]lastReading{}
	}
	f.last[pid] = lastReading{r: r, regions: p.Regions, at: start, took: time.Since(start), memory: tracedMemory(p)}
	f.record(pid, r, p.Regions)
}

// tracedMemory is what the trace says p holds: its live heap and mappings,
// and the resident memory its sampled faults made.
func tracedMemory(p *aggregate.ProcessSnapshot) uint64 {
	m := p.Heap.LiveBytes + p.Mapped.LiveBytes
	if p.Resident != nil {
		m += p.Resident.Bytes
	}
	return m
}

// changedMin: a process whose traced memory moved by more than a sixteenth
// of it, and at least changedMin, since its last reading, is read again
// by ReadChanged.
const changedMin = 1 << 20

// ReadChanged reads the processes of snap that have no reading yet, whose
// traced memory moved a lot since their last (by more than a sixteenth,
// at least 1 MiB), or whose due reading Read put off, each at most as
// often as footprintDuty allows. The --html timeline reads every process
// once a second (Read); meanwhile this keeps its heap-resident line from
// lagging a heap that grew or shrank (0 B for the first second of a heap
// of 25 MiB), or a second more behind a reading put off. The processes
// not read get no footprint.
func (f *FootprintPacer) ReadChanged(snap *aggregate.Snapshot) {
	for i := range snap.Processes {
		p := &snap.Processes[i]
		pid := int(p.PID)
		if _, stopped := f.exit[pid]; stopped || p.Exited {
			continue
		}
		last, ok := f.last[pid]
		if !ok && tracedMemory(p) == 0 {
			continue // nothing to show yet: the next due reading will do
		}
		if ok {
			now, then := tracedMemory(p), last.memory
			moved := max(now, then) - min(now, then)
			if !last.due && moved <= max(then/16, changedMin) || time.Since(last.at) < footprintDuty*last.took {
				continue
			}
		}
		start := time.Now()
		r, err := footprint.Read(pid, f.Options(pid, p.Regions))
		if err != nil {
			f.Log.Debug("footprint", "pid", pid, "err", err)
			continue
		}
		f.readNow(p, start, r)
	}
}

// ReadExit reads a process stopped at its exit, when its memory is still
// all there; regions are its tracked ones.
func (f *FootprintPacer) ReadExit(pid int, regions []footprint.Range) {
	r, err := footprint.Read(pid, f.Options(pid, regions))
	if err != nil {
		f.Log.Warn("footprint at exit", "pid", pid, "err", err)
		return
	}
	if f.exit == nil {
		f.exit = map[int]footprint.Reading{}
	}
	f.exit[pid] = r
	f.record(pid, r, regions)
}

// Forget drops pid's latest reading: a new address space (exec), or the
// process is gone (whole host).
func (f *FootprintPacer) Forget(pid int) { delete(f.last, pid) }

func (f *FootprintPacer) record(pid int, r footprint.Reading, regions []footprint.Range) {
	if f.Record != nil {
		f.Record(pid, r, regions)
	}
}

// latest gives a process its latest reading, when it is not read afresh
// (it exited, or was read within footprintDuty); a region made or cut
// since has no state.
func (f *FootprintPacer) latest(p *aggregate.ProcessSnapshot) {
	if last, ok := f.last[int(p.PID)]; ok {
		p.SetFootprint(Aligned(last.r, last.regions, p.Regions))
	}
}
