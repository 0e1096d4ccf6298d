package host

import "time"

// scanDelays are the waits before each scan of a process that has just
// executed a program: its dynamic linker maps its libraries within
// microseconds to milliseconds of the exec, and the scan waits until they
// are all there. Calls into a file first probed this way are missed until
// its probes are in (docs/whole-host.md).
var scanDelays = []time.Duration{
	0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second,
}

// Scans are the processes to scan again for new allocator files, each
// with its next scan's time.
type Scans struct {
	due map[int]*pendingScan
}

type pendingScan struct {
	due   time.Time
	tries int
}

// Add queues a scan of pid now, unless one is queued.
func (s *Scans) Add(pid int) {
	if s.due == nil {
		s.due = map[int]*pendingScan{}
	}
	if _, ok := s.due[pid]; !ok {
		s.due[pid] = &pendingScan{due: time.Now()}
	}
}

// Drop forgets pid's scan (it exited).
func (s *Scans) Drop(pid int) { delete(s.due, pid) }

// Run runs the scans that are due: scan says whether to try pid again
// (its libraries are not all mapped yet), which it is after the next
// delay, until the delays run out; done is called once a scan needs no
// retry.
func (s *Scans) Run(scan func(pid int) (retry bool), done func(pid int)) {
	now := time.Now()
	for pid, p := range s.due {
		if now.Before(p.due) {
			continue
		}
		retry := scan(pid)
		p.tries++
		if !retry || p.tries >= len(scanDelays) {
			delete(s.due, pid)
			if !retry {
				done(pid)
			}
			continue
		}
		p.due = now.Add(scanDelays[p.tries])
	}
}

// Wait is how long until the next scan is due, at most limit.
func (s *Scans) Wait(limit time.Duration) time.Duration {
	now := time.Now()
	for _, p := range s.due {
		limit = min(limit, max(p.due.Sub(now), 0))
	}
	return limit
}
