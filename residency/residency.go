// Package residency checks sampled pages against /proc/PID/pagemap: those
// no longer resident anonymous memory are uncharged (aggregate's resident
// attribution; the live source feeds them as Unresident events, which a
// recording keeps). It imports nothing from eBPF.
package residency

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// CheckEvery is how often the sampled pages are checked: a page released
// stays charged for up to this long.
const CheckEvery = time.Second

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmFile    = 1 << 61 // a file page or shared anonymous memory: not RssAnon
	pmPFN     = 1<<55 - 1
)

// zeroFrames are the page frames of the zero page and of the huge zero
// page. A read of a page never written, or released, maps them: pagemap
// shows such a page present and not file-backed, though it is no one's
// memory (RssAnon leaves it out). A leak check's or a debugger's read of
// a released page does that as well as the program's own. Found once,
// through pages of our own; frame numbers show to root only (without
// them a zero page counts as resident).
var zeroFrames = sync.OnceValue(func() struct{ zero, huge uint64 } {
	var z struct{ zero, huge uint64 }
	z.zero = readFrame(1, 0)
	// A huge page's worth, aligned, read once: the huge zero page, when
	// the kernel maps it (transparent_hugepage/use_zero_page).
	if z.huge = readFrame(2<<20, syscall.MADV_HUGEPAGE); z.huge == z.zero {
		z.huge = 0 // no huge zero page: the read mapped the small one
	}
	return z
})

// readFrame maps n bytes (a huge page's worth, 2 MiB-aligned, when n is
// 2 MiB), reads its first byte and returns the frame it maps there if
// /proc/kpageflags says it is a zero page; 0 otherwise. (Without a huge
// zero page, transparent_hugepage/use_zero_page 0, the read allocates a
// huge page of memory, freed at once: its frames are anyone's.)
func readFrame(n int, advice int) uint64 {
	b, err := syscall.Mmap(-1, 0, 2*n, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return 0
	}
	defer syscall.Munmap(b)
	start := uintptr(unsafe.Pointer(&b[0]))
	off := int((uintptr(n) - start%uintptr(n)) % uintptr(n))
	page := b[off : off+n]
	if advice != 0 {
		syscall.Madvise(page, advice)
	}
	readSink = page[0]
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0
	}
	defer f.Close()
	var e [8]byte
	addr := uint64(uintptr(unsafe.Pointer(&page[0])))
	if _, err := f.ReadAt(e[:], int64(addr/4096*8)); err != nil {
		return 0
	}
	v := binary.LittleEndian.Uint64(e[:])
	if v&pmPresent == 0 {
		return 0
	}
	pfn := v & pmPFN
	flags, err := os.Open("/proc/kpageflags")
	if err != nil {
		return 0
	}
	defer flags.Close()
	if _, err := flags.ReadAt(e[:], int64(pfn*8)); err != nil || binary.LittleEndian.Uint64(e[:])&kpfZeroPage == 0 {
		return 0
	}
	return pfn
}

// kpfZeroPage: /proc/kpageflags' KPF_ZERO_PAGE, set for the zero page and
// the huge zero page's frames.
const kpfZeroPage = 1 << 24

// ZeroPagesKnown reports whether the checks can tell the zero page from
// memory (page frame numbers show to root only): if not, a released page
// that is read again stays charged.
func ZeroPagesKnown() bool { return zeroFrames().zero != 0 }

// readSink keeps readFrame's read.
var readSink byte

// anonResident reports whether a pagemap entry is a page of anonymous
// memory resident: present, not a file's, not the zero page.
func anonResident(v uint64) bool {
	if v&pmPresent == 0 || v&pmFile != 0 {
		return false
	}
	z := zeroFrames()
	pfn := v & pmPFN
	return pfn == 0 || (pfn != z.zero && (z.huge == 0 || pfn-z.huge >= 512))
}

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
			if !anonResident(v) {
				gone = append(gone, a)
			}
		}
		i = j
	}
	return gone, nil
}

// Range is the pages of a sampled fault larger than a page: [Start, End),
// less the page at Skip if it is not 0 (a piece of the fault sampled on
// its own, before 6.2).
type Range struct {
	Start, End, Skip uint64
}

// ResidentBytes returns, for each range (page-aligned), the bytes of its
// pages that pid's pagemap shows present and anonymous. A huge page that
// a program releases in part (a Go heap's scavenger, madvise on a 64 KiB
// chunk) is split by the kernel: its sample is worth the part that stays.
func ResidentBytes(pid int, ranges []Range, pageSize uint64) ([]uint64, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]uint64, len(ranges))
	var buf []byte
	for i, r := range ranges {
		for first := r.Start / pageSize; first < r.End/pageSize; {
			n := min(r.End/pageSize-first, pagemapChunk)
			if cap(buf) < int(n*8) {
				buf = make([]byte, n*8)
			}
			buf = buf[:n*8]
			if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
				return nil, fmt.Errorf("read pagemap of %d: %w", pid, err)
			}
			for j := range n {
				v := binary.LittleEndian.Uint64(buf[j*8:])
				if a := (first + j) * pageSize; a != r.Skip && anonResident(v) {
					out[i] += pageSize
				}
			}
			first += n
		}
	}
	return out, nil
}
