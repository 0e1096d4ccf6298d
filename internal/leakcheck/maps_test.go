package leakcheck

import (
	"slices"
	"strings"
	"testing"
)

const sampleMaps = `55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1001 /usr/bin/prog
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1001 /usr/bin/prog
55d0c0a03000-55d0c0a04000 r--p 00002000 08:01 1001 /usr/bin/prog
55d0c0a04000-55d0c0a05000 rw-p 00003000 08:01 1001 /usr/bin/prog
55d0c0a05000-55d0c0a06000 rw-p 00000000 00:00 0 
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f0000021000-7f0004000000 ---p 00000000 00:00 0 
7f1000000000-7f1000022000 rw-p 00000000 00:00 0 
7f2000000000-7f2000001000 r--p 00000000 08:01 2002 /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000001000-7f2000100000 r-xp 00001000 08:01 2002 /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000100000-7f2000104000 r--p 00100000 08:01 2002 /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000104000-7f2000106000 rw-p 00104000 08:01 2002 /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000106000-7f2000113000 rw-p 00000000 00:00 0 
7f3000000000-7f3000001000 rw-s 00000000 00:05 3003 /dev/shm/seg with space
7f3000001000-7f3000002000 rw-s 00000000 00:05 3004 /dev/dri/card0
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
7ffc00021000-7ffc00025000 r--p 00000000 00:00 0                          [vvar]
7ffc00025000-7ffc00027000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`

func TestParseMapsAndRoots(t *testing.T) {
	ms, err := ParseMaps(strings.NewReader(sampleMaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 20 {
		t.Fatalf("%d mappings", len(ms))
	}
	if ms[14].Path != "/dev/shm/seg with space" || !ms[14].Shared() {
		t.Errorf("path with spaces: %+v", ms[14])
	}
	// A live block in an mmapped chunk at 7f1000000010 and one in [heap].
	blocks := []Block{{0x55d0c1000010, 100}, {0x7f1000000010, 0x20000}}
	roots := Roots(ms, RootOptions{Blocks: blocks, Threads: []Thread{{SP: 0x7ffc00020f38}}})
	want := []Range{
		{0x55d0c0a03000, 0x55d0c0a04000}, // relro of prog
		{0x55d0c0a04000, 0x55d0c0a05000}, // .data
		{0x55d0c0a05000, 0x55d0c0a06000}, // .bss past the file
		{0x7f2000100000, 0x7f2000104000}, // libc relro
		{0x7f2000104000, 0x7f2000106000}, // libc .data
		{0x7f2000106000, 0x7f2000113000}, // libc .bss
		{0x7f3000000000, 0x7f3000001000}, // shared memory
		{0x7ffc00020f38, 0x7ffc00021000}, // stack from sp
	}
	if !slices.Equal(roots, want) {
		t.Errorf("roots:\n got %x\nwant %x", roots, want)
	}
	// The program's own mapping merged by the kernel with an mmapped
	// chunk's (7f1000000000-7f1000022000 holds a block from 7f1000000010):
	// its part is a root, the chunk's is not.
	roots = Roots(ms, RootOptions{Blocks: blocks, Mapped: []Range{{0x7f1000021000, 0x7f1000030000}}})
	if !slices.Contains(roots, Range{0x7f1000021000, 0x7f1000022000}) || slices.ContainsFunc(roots, func(r Range) bool {
		return r.Start < 0x7f1000021000 && r.End > 0x7f1000000000
	}) {
		t.Errorf("roots with a merged mapping: %x", roots)
	}
	// -p: the heap's unknown parts are roots too.
	roots = Roots(ms, RootOptions{Blocks: blocks, UnknownHeap: true})
	var heapGaps []Range
	for _, r := range roots {
		if r.Start >= 0x55d0c1000000 && r.End <= 0x55d0c1021000 {
			heapGaps = append(heapGaps, r)
		}
	}
	wantGaps := []Range{{0x55d0c1000000, 0x55d0c1000010}, {0x55d0c1000010 + 100, 0x55d0c1021000}}
	if !slices.Equal(heapGaps, wantGaps) {
		t.Errorf("heap gaps %x, want %x", heapGaps, wantGaps)
	}
}

func TestGaps(t *testing.T) {
	bs := []Block{{10, 5}, {20, 0}, {30, 10}}
	got := gaps(Range{0, 50}, bs)
	want := []Range{{0, 10}, {15, 20}, {20, 30}, {40, 50}}
	if !slices.Equal(got, want) {
		t.Errorf("gaps %v, want %v", got, want)
	}
}
