package session

// dump ends an epoch of --dump-dir (pipeline.Dumps) with the table as it
// stands.
func (s *session) dump(final bool) error {
	s.refreshCounts() // lost events, exact counts: as every snapshot has them
	path, err := s.time.dumps.Write(s.snapshotAt(monotonicNow(), final), s.res, final)
	if err == nil {
		s.log.Info("dump", "file", path)
	}
	return err
}
