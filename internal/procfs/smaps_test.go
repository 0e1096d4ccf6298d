package procfs

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestParseSmaps(t *testing.T) {
	in := `7f5000001000-7f5000002000 rw-p 00000000 00:00 0
Size:                  4 kB
Rss:                   4 kB
VmFlags: rd wr mr mw me ac
55d0c8a00000-55d0c8a04000 r-xp 00002000 fe:00 247278                     /usr/lib/libc.so.6 (deleted)
Size:                 16 kB
Rss:                  12 kB
Pss:                   6 kB
`
	got, err := ParseSmaps(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []VMA{
		{Mapping: Mapping{Start: 0x55d0c8a00000, End: 0x55d0c8a04000, Offset: 0x2000, Perms: "r-xp", Dev: "fe:00",
			Inode: 247278, Path: "/usr/lib/libc.so.6", Deleted: true}, Rss: 12 << 10, Pss: 6 << 10},
		{Mapping: Mapping{Start: 0x7f5000001000, End: 0x7f5000002000, Perms: "rw-p", Dev: "00:00"}, Rss: 4 << 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSmaps =\n%+v\nwant\n%+v", got, want)
	}
	for _, bad := range []string{"10-20 rw-p 0 00:00 0\nRss: many kB\n", "no mapping here\n"} {
		if _, err := ParseSmaps(strings.NewReader(bad)); err == nil || !strings.HasPrefix(err.Error(), "parse smaps line ") {
			t.Errorf("ParseSmaps(%q) error %v, want one naming its line", bad, err)
		}
	}
}

func TestParseStatus(t *testing.T) {
	got, err := ParseStatus([]byte("Name:\tx\nRssAnon:\t  100 kB\nRssFile:\t 20 kB\nRssShmem:\t 3 kB\nVmSwap:\t 8 kB\n"))
	if want := (Status{RssAnon: 100 << 10, RssFile: 20 << 10, RssShmem: 3 << 10, VmSwap: 8 << 10}); err != nil || got != want {
		t.Errorf("ParseStatus = %+v, %v; want %+v", got, err, want)
	}
	// A kernel thread has no memory of its own (VmSwap alone is not enough).
	if _, err := ParseStatus([]byte("Name:\tx\nVmSwap:\t 8 kB\nRssAnon:\t 1 kB\n")); !errors.Is(err, ErrNoMemory) {
		t.Errorf("VmSwap and RssAnon only: error %v, want ErrNoMemory", err)
	}
	if _, err := ParseStatus([]byte("Name:\tkthreadd\n")); !errors.Is(err, ErrNoMemory) {
		t.Errorf("kernel thread: error %v, want ErrNoMemory", err)
	}
	if st, err := ReadStatus(os.Getpid()); err != nil || st.RssAnon == 0 {
		t.Errorf("our own status: %+v, %v", st, err)
	}
}

// TestPagemap reads our own pages: one written (present), one never
// touched (not present).
func TestPagemap(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, 2*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	mem[0] = 1
	m, err := OpenPagemap(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	buf := make([]byte, 16)
	first := uint64(uintptr(unsafe.Pointer(&mem[0]))) / 4096
	if n, err := m.ReadAt(buf, first); n != 2 || err != nil {
		t.Fatalf("ReadAt: %d entries, %v", n, err)
	}
	written, untouched := Entry(buf, 0), Entry(buf, 1)
	if !written.Present() || written.FileOrShared() || untouched.Present() || untouched.Swapped() {
		t.Errorf("written page %#x, untouched %#x: want present and anonymous, and not present", written, untouched)
	}
	if _, err := OpenPagemap(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a process that does not exist: %v, want os.ErrNotExist", err)
	}
}

// TestMemTotal: the machine's memory, in whole KiB as meminfo gives it.
func TestMemTotal(t *testing.T) {
	n, err := MemTotal()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n%1024 != 0 {
		t.Errorf("MemTotal %d bytes: want a positive count of whole KiB", n)
	}
}
