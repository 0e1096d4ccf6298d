package residency

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"unsafe"
)

// TestUnresident: of a mapping's pages, those written are resident
// anonymous memory; those never written, or released, are not.
func TestUnresident(t *testing.T) {
	const pages = 64
	b := written(t, pages, 2) // even pages resident
	if err := syscall.Madvise(b[8*4096:12*4096], syscall.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	base := uint64(uintptrOf(b))
	all := pageAddrs(base, pages)
	gone, err := openSelf(t).Unresident(all)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for i := 0; i < pages; i++ {
		if i%2 == 1 || (i >= 8 && i < 12) {
			want[base+uint64(i)*4096] = true
		}
	}
	if len(gone) != len(want) {
		t.Fatalf("%d pages not resident, want %d", len(gone), len(want))
	}
	for _, a := range gone {
		if !want[a] {
			t.Errorf("page %d reported not resident", (a-base)/4096)
		}
	}
}

// BenchmarkUnresident checks 1 GiB of resident memory sampled at
// the default rate (one page in 16): the cost of a pagemap check per GiB.
func BenchmarkUnresident(b *testing.B) {
	const size = 1 << 30
	m := written(b, size/4096, 1)
	base := uint64(uintptrOf(m))
	var sampled []uint64
	for a := uint64(0); a < size; a += 16 * 4096 {
		sampled = append(sampled, base+a)
	}
	pm := openSelf(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if gone, err := pm.Unresident(sampled); err != nil || len(gone) != 0 {
			b.Fatal(len(gone), err)
		}
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// written maps pages of anonymous memory, unmapped when the test ends,
// and writes every step-th page.
func written(tb testing.TB, pages, step int) []byte {
	tb.Helper()
	b, err := syscall.Mmap(-1, 0, pages*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Munmap(b) })
	for i := 0; i < pages; i += step {
		b[i*4096] = 1
	}
	return b
}

// pageAddrs is the addresses of n pages from base.
func pageAddrs(base uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)*4096
	}
	return out
}

// openSelf opens our own pagemap, closed when the test ends.
func openSelf(t testing.TB) *Pagemap {
	t.Helper()
	m, err := OpenPagemap(os.Getpid(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestResidentBytes: the resident bytes of a range are those of its pages
// written and not released since, less the page it skips.
func TestResidentBytes(t *testing.T) {
	const pages = 512 // a huge page's worth
	b := written(t, pages, 1)
	// 64 KiB released at the start and 64 KiB in the middle.
	for _, at := range []int{0, 256} {
		if err := syscall.Madvise(b[at*4096:(at+16)*4096], syscall.MADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
	}
	base := uint64(uintptrOf(b))
	page := func(i uint64) uint64 { return base + i*4096 }
	tests := []struct {
		name string
		r    Range
		want uint64
	}{
		{"all", Range{Start: base, End: page(pages)}, (pages - 32) * 4096},
		{"less a resident page", Range{Start: base, End: page(pages), Holes: []uint64{page(1 << 4)}}, (pages - 33) * 4096},
		{"less a released page", Range{Start: base, End: page(pages), Holes: []uint64{base}}, (pages - 32) * 4096},
		{"less pages of either kind", Range{Start: base, End: page(pages), Holes: []uint64{page(3), page(16), page(17), page(300)}},
			(pages - 35) * 4096},
		{"released", Range{Start: base, End: page(16)}, 0},
		{"the second half", Range{Start: page(pages / 2), End: page(pages)}, (pages/2 - 16) * 4096},
	}
	var ranges []Range
	for _, tt := range tests {
		ranges = append(ranges, tt.r)
	}
	got, err := openSelf(t).ResidentBytes(ranges)
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		if got[i] != tt.want {
			t.Errorf("%s: %d bytes resident, want %d", tt.name, got[i], tt.want)
		}
	}
}

// TestZeroPageNotResident: a released page read again maps the zero page
// (a leak check's read does that): pagemap shows it present, but it is no
// one's memory, and neither check counts it. On a kernel that maps no
// zero page on a read, the read gives the page memory: resident.
func TestZeroPageNotResident(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("page frame numbers show to root only")
	}
	const pages = 16
	b := written(t, pages, 1)
	if err := syscall.Madvise(b[:8*4096], syscall.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	var sum byte
	for i := 0; i < 8; i++ {
		sum += b[i*4096] // maps the zero page, where the kernel has one
	}
	if sum != 0 {
		t.Fatalf("released pages read %d", sum)
	}
	z := zeroFrames()
	if !ZeroPagesKnown() {
		t.Fatal("neither the zero page's frame nor its absence is known")
	}
	base := uint64(uintptrOf(b))
	all := pageAddrs(base, pages)
	// A kernel that maps no zero page on a read gave the 8 pages memory
	// of their own (zeroFrames).
	wantGone, wantHeld := all[:8], uint64(8*4096)
	if z.zero == 0 {
		t.Log("this kernel maps no zero page on a read")
		wantGone, wantHeld = nil, pages*4096
	}
	m := openSelf(t)
	gone, err := m.Unresident(all)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gone, wantGone) {
		t.Errorf("pages not resident %#x, want %#x", gone, wantGone)
	}
	held, err := m.ResidentBytes([]Range{{Start: base, End: base + pages*4096}})
	if err != nil {
		t.Fatal(err)
	}
	if held[0] != wantHeld {
		t.Errorf("%d bytes resident, want %d", held[0], wantHeld)
	}
}
