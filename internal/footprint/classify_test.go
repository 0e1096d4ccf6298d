package footprint

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

// fakeMemory serves words at addresses and resident bytes per range.
type fakeMemory struct {
	words map[uint64]uint64
	res   map[Range]uint64
}

func (m fakeMemory) read(b []byte, addr uint64) error {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], m.words[addr+uint64(i)])
	}
	return nil
}

func (m fakeMemory) resident(start, end uint64) (uint64, error) {
	return m.res[Range{start, end}], nil
}

const smaps = `00400000-00401000 r-xp 00000000 08:01 1234 /usr/bin/prog
00401000-00402000 rw-p 00001000 08:01 1234 /usr/bin/prog
Rss:                   4 kB
00402000-00410000 rw-p 00000000 00:00 0
Rss:                  16 kB
01000000-01100000 rw-p 00000000 00:00 0 [heap]
Rss:                1024 kB
7f0000000000-7f0000010000 rw-p 00000000 00:00 0
Rss:                  64 kB
7f0000010000-7f0004000000 ---p 00000000 00:00 0
Rss:                   0 kB
7f1000000000-7f1000200000 rw-p 00000000 00:00 0
Rss:                2048 kB
7f2000000000-7f2000100000 ---p 00000000 00:00 0
Rss:                   0 kB
7f2000100000-7f2000300000 rw-p 00000000 00:00 0
Rss:                 512 kB
7f3000000000-7f3000001000 ---p 00000000 00:00 0
7f3000001000-7f3000801000 rw-p 00000000 00:00 0
Rss:                  32 kB
7f3100000000-7f3100001000 ---p 00000000 00:00 0
7f3100001000-7f3100101000 rw-p 00000000 00:00 0
Rss:                  16 kB
7f4000000000-7f4000010000 rw-p 00000000 00:00 0
Rss:                  40 kB
7f5000000000-7f5000001000 rw-s 00000000 00:01 99 /dev/zero (deleted)
Rss:                   4 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  12 kB
`

// mustParse parses a canned smaps.
func mustParse(t *testing.T, s string) []vma {
	t.Helper()
	vmas, err := parseSmaps(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return vmas
}

func TestClassify(t *testing.T) {
	vmas := mustParse(t, smaps)
	mem := fakeMemory{
		words: map[uint64]uint64{
			// An arena's heap_info: ar_ptr, prev, size, mprotect_size.
			0x7f0000000000: 0x7f0000000020, 0x7f0000000008: 0, 0x7f0000000010: 0x10000, 0x7f0000000018: 0x10000,
			// Two large blocks sharing a VMA: prev_size 0, size|IS_MMAPPED.
			0x7f1000000008: 0x100000 | 2, 0x7f1000100008: 0x100000 | 2,
		},
		res: map[Range]uint64{{0x7f2000100000, 0x7f2000180000}: 256 << 10, {0x7f2000200000, 0x7f2000280000}: 256 << 10},
	}
	o := Options{Glibc: true, Ranges: []Range{
		{0x7f2000000000, 0x7f2000180000}, // a reservation committed in part
		{0x7f2000200000, 0x7f2000280000}, // a region sharing its VMA with other memory
		{0x7f3000000000, 0x7f3000801000}, // a thread stack made by a traced mmap
		{0x7f3100000000, 0x7f3100101000}, // another, whose thread has ended: found by its guard
	}}
	sp := []uint64{0x7f3000800f00}
	r := classify(vmas, sp, o, nil, mem)
	want := Reading{
		HeapResident:  (1024 + 64 + 2048) << 10,
		AnonResident:  (256 + 256) << 10, // the range inside the VMA, and the one sharing it
		StackResident: (32 + 16 + 12) << 10,
		FileResident:  (4 + 16 + 4) << 10, // the .bss after the data segment included
	}
	if r.HeapResident != want.HeapResident || r.AnonResident != want.AnonResident ||
		r.StackResident != want.StackResident || r.FileResident != want.FileResident {
		t.Errorf("got heap %d anon %d stack %d file %d, want %+v", r.HeapResident, r.AnonResident,
			r.StackResident, r.FileResident, want)
	}
	states := []State{
		{Reserved: 0x180000, Committed: 0x80000, Resident: 256 << 10},
		{Reserved: 0x80000, Committed: 0x80000, Resident: 256 << 10},
		{Reserved: 0x801000, Committed: 0x800000, Resident: 32 << 10},
		{Reserved: 0x101000, Committed: 0x100000, Resident: 16 << 10},
	}
	for i, st := range states {
		if r.Ranges[i] != st {
			t.Errorf("range %d: %+v, want %+v", i, r.Ranges[i], st)
		}
	}
	// The untracked 40 kB at 0x7f4000000000 has no glibc header: unexplained.
	r.RSSAnon = (1024 + 64 + 2048 + 512 + 32 + 16 + 12 + 16 + 40) << 10
	r.RSSFile, r.RSSShmem = 4<<10, 4<<10
	r.RSS = r.RSSAnon + r.RSSFile + r.RSSShmem
	r.settle()
	if r.Unexplained != 40<<10 {
		t.Errorf("unexplained %d, want %d", r.Unexplained, 40<<10)
	}
	// Another allocator: every untracked anonymous mapping is its own.
	o.Glibc = false
	if r := classify(vmas, sp, o, nil, mem); r.HeapResident != want.HeapResident+(40<<10) {
		t.Errorf("not glibc: heap %d, want %d", r.HeapResident, want.HeapResident+(40<<10))
	}
}

func TestParseStatus(t *testing.T) {
	var r Reading
	if err := parseStatus([]byte("Name:\tx\nRssAnon:\t  100 kB\nRssFile:\t 20 kB\nRssShmem:\t 3 kB\nVmSwap:\t 7 kB\n"), &r); err != nil {
		t.Fatal(err)
	}
	if r.RSS != 123<<10 || r.RSSAnon != 100<<10 || r.RSSFile != 20<<10 || r.RSSShmem != 3<<10 || r.Swap != 7<<10 {
		t.Errorf("got %+v", r)
	}
	if err := parseStatus([]byte("Name:\tkthreadd\n"), &r); err == nil {
		t.Error("a status without Rss lines must be an error")
	}
}

// TestReadRollup: a light reading of this process (status and
// smaps_rollup); pid 2, kthreadd, is a kernel thread.
func TestReadRollup(t *testing.T) {
	r, err := ReadRollup(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Rollup || r.RSS == 0 || r.RSS != r.RSSAnon+r.RSSFile+r.RSSShmem || r.PSS == 0 || r.PSS > r.RSS+(1<<20) {
		t.Errorf("got %+v: want RSS > 0, its parts' sum, 0 < PSS <= RSS (read a moment later: 1 MiB slack)", r)
	}
	if _, err := ReadRollup(2); !errors.Is(err, ErrKernelThread) {
		t.Errorf("kthreadd: %v, want ErrKernelThread", err)
	}
}

// TestClassifyMergedLargeBlock: a glibc large block that the kernel
// merged with a tracked range (in a cgo program, next to the runtime's
// mappings) is found by its header in the gap; a gap without one stays
// unexplained.
func TestClassifyMergedLargeBlock(t *testing.T) {
	vmas := mustParse(t, `7f6000000000-7f6000300000 rw-p 00000000 00:00 0
Rss:                3072 kB
7f7000000000-7f7000300000 rw-p 00000000 00:00 0
Rss:                3072 kB
`)
	mem := fakeMemory{
		words: map[uint64]uint64{0x7f6000100008: 0x200000 | isMmapped}, // prev_size 0, size|IS_MMAPPED
		res: map[Range]uint64{
			{0x7f6000000000, 0x7f6000100000}: 1 << 20, {0x7f6000100000, 0x7f6000300000}: 2 << 20,
			{0x7f7000000000, 0x7f7000100000}: 1 << 20, {0x7f7000100000, 0x7f7000300000}: 2 << 20,
		},
	}
	o := Options{Glibc: true, Ranges: []Range{{0x7f6000000000, 0x7f6000100000}, {0x7f7000000000, 0x7f7000100000}}}
	r := classify(vmas, nil, o, nil, mem)
	if r.HeapResident != 2<<20 || r.AnonResident != 2<<20 {
		t.Errorf("heap %d, mmap %d: want the block's 2 MiB and the ranges' 2 MiB", r.HeapResident, r.AnonResident)
	}
	for i, st := range r.Ranges {
		if st != (State{Reserved: 1 << 20, Committed: 1 << 20, Resident: 1 << 20}) {
			t.Errorf("range %d: %+v", i, st)
		}
	}
}

// TestClassifyLargeBlockMergedWithOther: a glibc large block that the
// kernel merged with an untracked anonymous mapping after it (another
// library's 12 KiB) is heap for its own pages; the rest stays unexplained.
// The whole VMA was unexplained: a 64 MiB block showed as "unexplained
// 64.0 MiB" and heap RSS 8 KiB.
func TestClassifyLargeBlockMergedWithOther(t *testing.T) {
	vmas := mustParse(t, `7f6000000000-7f6000203000 rw-p 00000000 00:00 0
Rss:                2060 kB
`)
	mem := fakeMemory{
		words: map[uint64]uint64{0x7f6000000008: 0x200000 | isMmapped},
		res:   map[Range]uint64{{0x7f6000000000, 0x7f6000200000}: 2 << 20},
	}
	r := classify(vmas, nil, Options{Glibc: true}, nil, mem)
	if r.HeapResident != 2<<20 {
		t.Errorf("heap %d, want the block's 2 MiB", r.HeapResident)
	}
	if sum := r.HeapResident + r.AnonResident + r.StackResident + r.FileResident + r.GoRuntimeResident; sum != 2<<20 {
		t.Errorf("explained %d bytes, want 2 MiB (the other 12 KiB unexplained)", sum)
	}
}
