package report

import "github.com/memtrace/memtrace/internal/aggregate"

// Epoch makes a report a numbered dump (--dump-dir): the figures of the
// previous dump are its baseline, and process and callsite records carry
// the activity since, as epoch_* fields.
type Epoch struct {
	// Number counts the dumps from 1.
	Number int
	// StartNS is the time of the previous dump (0 for the first).
	StartNS uint64
	// Processes and Sites are the heap figures of the previous dump.
	Processes map[uint32]aggregate.Stats
	Sites     map[EpochSite]aggregate.Stats
	// Marks is how many of the snapshot's marks earlier dumps listed.
	Marks int
}

// EpochSite names a call site across dumps.
type EpochSite struct {
	PID      uint32
	Site     aggregate.SiteKey
	Category aggregate.Category
}

// FirstEpoch is the first dump's: everything so far is its activity.
func FirstEpoch() *Epoch { return &Epoch{Number: 1} }

// Next is the epoch of the dump after e, whose snapshot was s.
func (e *Epoch) Next(s aggregate.Snapshot) *Epoch {
	e = &Epoch{Number: e.Number + 1, StartNS: s.Time, Processes: map[uint32]aggregate.Stats{},
		Sites: map[EpochSite]aggregate.Stats{}, Marks: len(s.Marks)}
	for _, p := range s.Processes {
		e.Processes[p.PID] = p.Heap
		for _, site := range p.Sites {
			e.Sites[EpochSite{p.PID, site.Key(), site.Category}] = site.Stats
		}
	}
	return e
}

// epochRecord is the epoch part of process and callsite records
// (embedded), present only in dumps.
type epochRecord struct {
	EpochAllocs     *uint64 `json:"epoch_allocs,omitempty"`
	EpochAllocBytes *uint64 `json:"epoch_alloc_bytes,omitempty"`
	EpochFrees      *uint64 `json:"epoch_frees,omitempty"`
	EpochFreedBytes *uint64 `json:"epoch_freed_bytes,omitempty"`
}

func newEpochRecord(now, base aggregate.Stats) epochRecord {
	return epochRecord{
		EpochAllocs:     u64(now.Allocs - min(base.Allocs, now.Allocs)),
		EpochAllocBytes: u64(now.AllocBytes - min(base.AllocBytes, now.AllocBytes)),
		EpochFrees:      u64(now.Frees - min(base.Frees, now.Frees)),
		EpochFreedBytes: u64(now.FreedBytes - min(base.FreedBytes, now.FreedBytes)),
	}
}

// process is a process's epoch record (empty outside dumps).
func (e *Epoch) process(p aggregate.ProcessSnapshot) epochRecord {
	if e == nil {
		return epochRecord{}
	}
	return newEpochRecord(p.Heap, e.Processes[p.PID]) // a new process starts from zero
}

func (e *Epoch) site(pid uint32, s aggregate.SiteSnapshot) epochRecord {
	if e == nil {
		return epochRecord{}
	}
	return newEpochRecord(s.Stats, e.Sites[EpochSite{pid, s.Key(), s.Category}])
}

// report adds the dump's number and start to its report record.
func (e *Epoch) report(r reportRecord) reportRecord {
	if e != nil {
		n, start := e.Number, e.StartNS
		r.Epoch, r.EpochStartNS = &n, &start
	}
	return r
}
