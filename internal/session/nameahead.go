package session

import "time"

// Naming a report's first sites reads their modules' line tables: for
// libc, from its debug file, ~130 ms of CPU (inflating its sections and
// indexing its units), which node -e 0's final report spent after its
// exit. nameAhead starts that on another core: once while a target runs,
// nameAheadAfter past its attach (node -e 0 left most of a core idle
// then: the reader took a third of one), and again at the exit stop,
// beside the leak check, the detach and the wait for the exit status,
// for the sites that came since (their modules' tables mostly read).
const (
	// nameAheadSites: the call sites named ahead, by live bytes (the
	// report's default --top is 10 per table).
	nameAheadSites = 32
	// nameAheadMaxBlocks: above this many live blocks the leak check's
	// own memory is large (~50 bytes a block), and a line table read
	// beside it would add to memtrace's peak: the report reads it after.
	nameAheadMaxBlocks = 1 << 20
	// nameAheadAfter: how long a target runs before its top sites are
	// named the first time: by then a program's start has made the calls
	// of most of the modules its report names.
	nameAheadAfter = 200 * time.Millisecond
	// nameAheadTablesBound: naming waits for the target's unwind tables
	// to be built (a first run of node: ~1 s of CPU beside its run), up
	// to this long past its attach: both want the core the target leaves.
	nameAheadTablesBound = 3 * time.Second
)

// nameAheadDue names ahead, once, the sites of each target that has run
// nameAheadAfter since its probes went on (not in the whole-host mode,
// whose reports name only what they print).
func (s *session) nameAheadDue() {
	if s.host != nil || s.res == nil {
		return
	}
	for _, pid := range s.namingDue(time.Now()) {
		s.nameAhead(uint32(pid))
	}
}

// namingDue returns the targets due to be named ahead at now, and marks
// them named: each once per program it runs.
func (s *session) namingDue(now time.Time) []int {
	var due []int
	for pid, t := range s.targets {
		if t.namedAhead || t.exited || t.attached.IsZero() || now.Sub(t.attached) < nameAheadAfter {
			continue
		}
		if !t.tables.AllIn() && now.Sub(t.attached) < nameAheadTablesBound {
			continue // the tables' build has the spare core first
		}
		t.namedAhead = true
		due = append(due, pid)
	}
	return due
}

// nameAhead resolves, in the background, the call sites of pid's final
// report that hold the most live bytes.
func (s *session) nameAhead(pid uint32) {
	if s.res == nil || s.table.LiveCount(pid) > nameAheadMaxBlocks {
		return
	}
	addrs := s.table.TopSiteAddresses(pid, nameAheadSites)
	if len(addrs) == 0 {
		return
	}
	// Nothing waits for it: the report's own look-ups wait for a table
	// being read (once per module), and the resolver is never closed.
	go func() {
		for _, a := range addrs {
			s.res.Resolve(int(pid), a)
		}
	}()
}
