package pagewalk

import (
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// TestWalkOwnPages maps pages of the test's own, writes them all, clears
// the accessed bits, then reads some and writes others: the walk must see
// exactly those accessed, all dirty (written since mapped) and the
// untouched tail of the mapping not mapped.
func TestWalkOwnPages(t *testing.T) {
	w := openWalker(t)
	const pages, ps = 64, 4096
	b, err := syscall.Mmap(-1, 0, (pages+16)*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	syscall.Madvise(b, syscall.MADV_NOHUGEPAGE) //: 4 KiB pages, whatever THP's setting
	for i := range pages {
		b[i*ps] = 1
	}
	if os.Getenv("COLD") != "" {
		syscall.Madvise(b, 20)
	} else if err := Clear(os.Getpid()); err != nil {
		t.Fatal(err)
	}

	for i := range 10 {
		sink += b[i*ps] // read
	}
	for i := 20; i < 30; i++ {
		b[i*ps] = 2
	}
	lo := uint64(uintptr(unsafe.Pointer(&b[0])))
	got := map[uint64]Bits{}
	st, err := w.Walk(os.Getpid(), lo, lo+uint64(len(b)), func(start uint64, tb *Table) {
		for i, bits := range tb {
			if a := start + uint64(i)*ps; a >= lo && a < lo+uint64(len(b)) {
				got[a] = bits
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("walk: %+v", st)
	if st.Failed != 0 || st.Tables == 0 {
		t.Fatalf("walk: %+v", st)
	}
	for i := range pages + 16 {
		want := Bits(0)
		if i < pages {
			want = Mapped | Dirty
		}
		if i < 10 || (i >= 20 && i < 30) {
			want |= Accessed
		}
		if g := got[lo+uint64(i)*ps]; g != want {
			t.Errorf("page %d: bits %b, want %b", i, g, want)
		}
	}

}

var sink byte

// TestWalkHugePage: a transparent huge page is one entry, its bits those
// of each of its 512 pages.
func TestWalkHugePage(t *testing.T) {
	w := openWalker(t)
	b, err := syscall.Mmap(-1, 0, 2*TableSpan, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	off := int((TableSpan - uint64(uintptr(unsafe.Pointer(&b[0])))%TableSpan) % TableSpan)
	huge := b[off : off+TableSpan]
	if err := syscall.Madvise(huge, syscall.MADV_HUGEPAGE); err != nil {
		t.Fatal(err)
	}
	huge[0] = 1 // faults in the huge page, if the kernel has one free
	if err := Clear(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	sink += huge[TableSpan-1]
	lo := uint64(uintptr(unsafe.Pointer(&huge[0])))
	var tables int
	got := map[Bits]int{}
	if _, err := w.Walk(os.Getpid(), lo, lo+TableSpan, func(start uint64, tb *Table) {
		tables++
		for _, bits := range tb {
			got[bits]++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if want := (map[Bits]int{Mapped | Accessed | Dirty: 512}); tables != 1 || len(got) != 1 || got[Mapped|Accessed|Dirty] != 512 {
		t.Fatalf("huge page: %d tables, bits %v, want one with %v (AnonHugePages in smaps says whether the kernel gave one)", tables, got, want)
	}
}

// openWalker loads the walk, closed at the test's end; it needs root.
func openWalker(t *testing.T) *Walker {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the page-table walk needs root")
		}
		t.Skip("the page-table walk needs root")
	}
	w, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}
