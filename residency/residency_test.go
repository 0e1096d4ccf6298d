package residency

import (
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// TestUnresident: of a mapping's pages, those written are resident
// anonymous memory; those never written, or released, are not.
func TestUnresident(t *testing.T) {
	const pages = 64
	b, err := syscall.Mmap(-1, 0, pages*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	for i := 0; i < pages; i += 2 {
		b[i*4096] = 1 // even pages resident
	}
	if err := syscall.Madvise(b[8*4096:12*4096], syscall.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	base := uint64(uintptrOf(b))
	var all []uint64
	for i := 0; i < pages; i++ {
		all = append(all, base+uint64(i)*4096)
	}
	gone, err := Unresident(os.Getpid(), all, 4096)
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
	m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Munmap(m)
	for i := 0; i < size; i += 4096 {
		m[i] = 1
	}
	base := uint64(uintptrOf(m))
	var sampled []uint64
	for a := uint64(0); a < size; a += 16 * 4096 {
		sampled = append(sampled, base+a)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if gone, err := Unresident(os.Getpid(), sampled, 4096); err != nil || len(gone) != 0 {
			b.Fatal(len(gone), err)
		}
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
