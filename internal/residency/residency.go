// Package residency checks sampled pages against /proc/PID/pagemap: those
// no longer resident anonymous memory are uncharged (aggregate's resident
// attribution; the live source feeds them as Unresident events, which a
// recording keeps). It imports nothing from eBPF.
package residency

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/memtrace/memtrace/internal/procfs"
)

// CheckEvery is how often the sampled pages are checked: a page released
// stays charged for up to this long.
const CheckEvery = time.Second

// zeroFrames are the page frames of the zero page and of the huge zero
// page. A read of a page never written, or released, maps them: pagemap
// shows such a page present and not file-backed, though it is no one's
// memory (RssAnon leaves it out). A leak check's or a debugger's read of
// a released page does that as well as the program's own. Found once,
// through pages of our own; frame numbers show to root only (without
// them a zero page counts as resident). shown: pagemap showed our page's
// frame. Some kernels map no zero page on a read (seen in a
// paravirtualized guest, PVM): the read allocates a page, which is
// memory, and there is nothing to tell apart.
var zeroFrames = sync.OnceValue(func() zeroPages {
	var z zeroPages
	z.zero, z.shown = readFrame(1, 0)
	// A huge page's worth, aligned, read once: the huge zero page, when
	// the kernel maps it (transparent_hugepage/use_zero_page).
	if z.huge, _ = readFrame(2<<20, syscall.MADV_HUGEPAGE); z.huge == z.zero {
		z.huge = 0 // no huge zero page: the read mapped the small one
	}
	return z
})

// zeroPages is what zeroFrames found.
type zeroPages struct {
	zero, huge uint64
	shown      bool
}

// readFrame maps n bytes (a huge page's worth, 2 MiB-aligned, when n is
// 2 MiB), reads its first byte and returns the frame it maps there if
// /proc/kpageflags says it is a zero page; 0 otherwise. shown: the frame
// showed, and kpageflags said it is a zero page or anonymous memory.
// (Without a huge zero page, transparent_hugepage/use_zero_page 0, the
// read allocates a huge page of memory, freed at once: its frames are
// anyone's.)
func readFrame(n int, advice int) (zero uint64, shown bool) {
	b, err := syscall.Mmap(-1, 0, 2*n, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return 0, false
	}
	defer syscall.Munmap(b)
	start := uintptr(unsafe.Pointer(&b[0]))
	off := int((uintptr(n) - start%uintptr(n)) % uintptr(n))
	page := b[off : off+n]
	if advice != 0 {
		syscall.Madvise(page, advice)
	}
	readSink = page[0]
	m, err := OpenPagemap(os.Getpid(), 4096)
	if err != nil {
		return 0, false
	}
	defer m.Close()
	buf, err := m.entries(uint64(uintptr(unsafe.Pointer(&page[0])))/4096, 1)
	if err != nil {
		return 0, false
	}
	v := procfs.Entry(buf, 0)
	if !v.Present() {
		return 0, false
	}
	pfn := v.PFN()
	if pfn == 0 {
		return 0, false // hidden: without CAP_SYS_ADMIN
	}
	flags, err := os.Open("/proc/kpageflags")
	if err != nil {
		return 0, false
	}
	defer flags.Close()
	var e [8]byte
	if _, err := flags.ReadAt(e[:], int64(pfn*8)); err != nil {
		return 0, false
	}
	switch flags := binary.LittleEndian.Uint64(e[:]); {
	case flags&kpfZeroPage != 0:
		return pfn, true
	case flags&kpfAnon != 0:
		return 0, true // anonymous memory: no zero page on a read here
	default:
		return 0, false // flags that tell neither
	}
}

// kpfZeroPage: /proc/kpageflags' KPF_ZERO_PAGE, set for the zero page and
// the huge zero page's frames. kpfAnon: KPF_ANON, a page of anonymous
// memory.
const (
	kpfZeroPage = 1 << 24
	kpfAnon     = 1 << 12
)

// ZeroPagesKnown reports whether the checks can tell the zero page from
// memory (page frame numbers show to root only): if not, a released page
// that is read again stays charged.
func ZeroPagesKnown() bool {
	z := zeroFrames()
	return z.zero != 0 || z.shown
}

// readSink keeps readFrame's read (the compiler would drop a read whose
// value goes nowhere).
var readSink byte //nolint:unused // written only, on purpose

// anonResident reports whether a pagemap entry is a page of anonymous
// memory resident: present, not a file's, not the zero page.
func anonResident(v procfs.PageEntry) bool {
	if !v.Present() || v.FileOrShared() { // a file page or shared anonymous memory: not RssAnon
		return false
	}
	z := zeroFrames()
	pfn := v.PFN()
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

// Pagemap reads a process's /proc/PID/pagemap: a check opens it once for
// its sampled pages and its ranges.
type Pagemap struct {
	f        *procfs.Pagemap
	pageSize uint64
	buf      []byte
}

// OpenPagemap opens pid's pagemap; the error matches fs.ErrNotExist when
// the process is gone.
func OpenPagemap(pid int, pageSize uint64) (*Pagemap, error) {
	f, err := procfs.OpenPagemap(pid)
	if err != nil {
		return nil, err
	}
	return &Pagemap{f: f, pageSize: pageSize}, nil
}

// Close closes the pagemap.
func (m *Pagemap) Close() error { return m.f.Close() }

// entries reads the entries of n pages from page number first (n at most
// pagemapChunk), 8 bytes each, into a buffer reused by the next read.
func (m *Pagemap) entries(first, n uint64) ([]byte, error) {
	if uint64(cap(m.buf)) < n*8 {
		m.buf = make([]byte, n*8)
	}
	m.buf = m.buf[:n*8]
	got, err := m.f.ReadAt(m.buf, first)
	if uint64(got) < n {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("read pagemap: %w", io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	return m.buf, nil
}

// Unresident returns those of pages (sorted addresses, pageSize apart at
// least) that the pagemap shows not present, or not anonymous.
func (m *Pagemap) Unresident(pages []uint64) ([]uint64, error) {
	ps := m.pageSize
	var gone []uint64
	for i := 0; i < len(pages); {
		j := i + 1
		for j < len(pages) && (pages[j]-pages[j-1])/ps < pagemapGap &&
			(pages[j]-pages[i])/ps < pagemapChunk {
			j++
		}
		first, last := pages[i]/ps, pages[j-1]/ps
		buf, err := m.entries(first, last-first+1)
		if err != nil {
			return nil, err
		}
		for _, a := range pages[i:j] {
			if !anonResident(procfs.Entry(buf, a/ps-first)) {
				gone = append(gone, a)
			}
		}
		i = j
	}
	return gone, nil
}

// Range is the pages of a sampled fault larger than a page: [Start, End),
// less the pages in Holes (in increasing order): no longer the fault's,
// or before 6.2 a piece of it sampled on its own.
type Range struct {
	Start, End uint64
	Holes      []uint64
}

// ResidentBytes returns, for each range (page-aligned), the bytes of its
// pages that the pagemap shows present and anonymous. A huge page that
// a program releases in part (a Go heap's scavenger, madvise on a 64 KiB
// chunk) is split by the kernel: its sample is worth the part that stays.
func (m *Pagemap) ResidentBytes(ranges []Range) ([]uint64, error) {
	ps := m.pageSize
	out := make([]uint64, len(ranges))
	for i, r := range ranges {
		holes := r.Holes
		for first := r.Start / ps; first < r.End/ps; {
			n := min(r.End/ps-first, pagemapChunk)
			buf, err := m.entries(first, n)
			if err != nil {
				return nil, err
			}
			for j := range n {
				a := (first + j) * ps
				for len(holes) > 0 && holes[0] < a {
					holes = holes[1:]
				}
				if (len(holes) == 0 || holes[0] != a) && anonResident(procfs.Entry(buf, j)) {
					out[i] += ps
				}
			}
			first += n
		}
	}
	return out, nil
}
