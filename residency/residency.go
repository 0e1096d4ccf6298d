// Package residency checks sampled pages against /proc/PID/pagemap: those
// no longer resident anonymous memory are uncharged (aggregate's resident
// attribution; the live source feeds them as Unresident events, which a
// recording keeps). It imports nothing from eBPF.
package residency

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"
)

// CheckEvery is how often the sampled pages are checked: a page released
// stays charged for up to this long.
const CheckEvery = time.Second

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmFile    = 1 << 61 // a file page or shared anonymous memory: not RssAnon
)

// pagemapGap: sampled pages closer than this many pages are read in one
// pread (8 bytes a page) rather than one each.
const pagemapGap = 512

// pagemapChunk bounds one read to this many pages' entries (512 KiB), so
// that the buffer does not grow with the process (a 64 GiB range would
// need 128 MiB).
const pagemapChunk = 64 << 10

// Pacer says when a check is due.
type Pacer struct {
	due time.Time
}

// Start makes the first check due CheckEvery from now.
func (p *Pacer) Start() { p.due = time.Now().Add(CheckEvery) }

// Due reports whether a check is due.
func (p *Pacer) Due() bool { return !time.Now().Before(p.due) }

// Checked schedules the next check after one that began at start. A check
// costs tens of ms per GiB sampled (BenchmarkUnresident): with much memory
// it runs less often, so that it stays under 5% of a CPU; released memory
// then stays charged longer.
func (p *Pacer) Checked(start time.Time) {
	p.due = time.Now().Add(max(CheckEvery, 20*time.Since(start)))
}

// Unresident returns those of pages (sorted addresses, pageSize apart at
// least) that pid's pagemap shows not present, or not anonymous.
func Unresident(pid int, pages []uint64, pageSize uint64) ([]uint64, error) {
	if len(pages) == 0 {
		return nil, nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var gone []uint64
	var buf []byte
	for i := 0; i < len(pages); {
		j := i + 1
		for j < len(pages) && (pages[j]-pages[j-1])/pageSize < pagemapGap &&
			(pages[j]-pages[i])/pageSize < pagemapChunk {
			j++
		}
		first, last := pages[i]/pageSize, pages[j-1]/pageSize
		n := int(last-first+1) * 8
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
			return nil, fmt.Errorf("read pagemap of %d: %w", pid, err)
		}
		for _, a := range pages[i:j] {
			v := binary.LittleEndian.Uint64(buf[(a/pageSize-first)*8:])
			if v&pmPresent == 0 || v&pmFile != 0 {
				gone = append(gone, a)
			}
		}
		i = j
	}
	return gone, nil
}
