package session

// Naming a report's first sites reads their modules' line tables: for
// libc, from its debug file, ~130 ms of CPU (inflating its sections and
// indexing its units), which node -e 0's final report spent after its
// exit. nameAhead starts that on another core at the exit stop, so that
// it runs beside the leak check, the detach and the wait for the exit
// status.
const (
	// nameAheadSites: the call sites named ahead, by live bytes (the
	// report's default --top is 10 per table).
	nameAheadSites = 32
	// nameAheadMaxBlocks: above this many live blocks the leak check's
	// own memory is large (~50 bytes a block), and a line table read
	// beside it would add to memtrace's peak: the report reads it after.
	nameAheadMaxBlocks = 1 << 20
)

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
