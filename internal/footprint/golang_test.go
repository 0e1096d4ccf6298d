package footprint

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadGoHeap reads a Go program holding 192 MiB of slices (the
// resident fixture, built with the Go toolchain): its arenas are found
// from the runtime's own list (also in a position-independent build), or,
// its symbol table stripped, by their alignment; either way the Go heap resident is what the runtime says its
// spans hold, and the reading adds up to the RSS (within 16 pages: the
// process runs) with next to nothing unexplained.
func TestReadGoHeap(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain:", err)
	}
	for _, tc := range []struct {
		name   string
		flags  []string
		source string
	}{
		{"symbols", nil, GoHeapFromRuntime},
		{"pie", []string{"-buildmode=pie"}, GoHeapFromRuntime}, // mheap_ moved by the load bias
		{"stripped", []string{"-ldflags=-s -w"}, GoHeapFromAddresses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "resident_go")
			build := exec.Command("go", append(append([]string{"build"}, tc.flags...), "-o", bin, ".")...)
			build.Dir = filepath.Join("..", "..", "testdata", "resident_go")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "WAIT=1", "MEMSTATS=1")
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			fmt.Fprintln(stdin, "go")
			lines := bufio.NewScanner(stdout)
			var ms struct{ sys, inuse, released, stacks uint64 }
			for lines.Scan() {
				if strings.HasPrefix(lines.Text(), "heap_sys") {
					fmt.Sscanf(lines.Text(), "heap_sys %d heap_inuse %d heap_released %d stack_inuse %d",
						&ms.sys, &ms.inuse, &ms.released, &ms.stacks)
					break
				}
			}
			r, err := Read(cmd.Process.Pid, Options{Detect: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v; runtime: %+v", r, ms)
			if r.GoHeapSource != tc.source {
				t.Errorf("go heap found by %q, want %q", r.GoHeapSource, tc.source)
			}
			// The arenas are whole; what the runtime has mapped of them
			// for its heap and stack spans is committed.
			if r.GoHeap.Reserved%heapArenaBytes != 0 || r.GoHeap.Committed < ms.sys+ms.stacks {
				t.Errorf("reserved %d, committed %d: want whole arenas, and HeapSys+StackInuse %d committed",
					r.GoHeap.Reserved, r.GoHeap.Committed, ms.sys+ms.stacks)
			}
			// Resident: the spans in use (less 64 pages: a span or stack in
			// use may have pages never written), and no more than the free
			// spans not yet given back.
			inuse := ms.inuse + ms.stacks - 64*4096
			if r.GoHeap.Resident < inuse || r.GoHeap.Resident > ms.sys-ms.released+ms.stacks {
				t.Errorf("go heap resident %d, want from in use less 64 pages %d to unreleased %d",
					r.GoHeap.Resident, inuse, ms.sys-ms.released+ms.stacks)
			}
			if r.GoHeap.Resident < 192<<20 || r.HeapResident != 0 || r.AnonResident != 0 {
				t.Errorf("go heap resident %d, heap %d, mmap %d: want the 192 MiB kept, 0, 0",
					r.GoHeap.Resident, r.HeapResident, r.AnonResident)
			}
			// The process runs (the runtime's background work may touch
			// a page between status and smaps): a few pages of drift.
			sum := r.GoHeap.Resident + r.GoRuntimeResident + r.StackResident + r.FileResident + r.Unexplained
			if sum < r.RSS || sum > r.RSS+16*4096 || r.Unexplained > r.RSS/100 {
				t.Errorf("parts add up to %d, RSS %d; unexplained %d: want at most 1%%", sum, r.RSS, r.Unexplained)
			}
		})
	}
}

const goSmaps = `00400000-00500000 r-xp 00000000 08:01 77 /usr/bin/goprog
Rss:                 800 kB
c000000000-c000400000 rw-p 00000000 00:00 0
Rss:                4096 kB
c000400000-c004000000 ---p 00000000 00:00 0
Rss:                   0 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Rss:                 512 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  12 kB
`

// TestClassifyGo: mheap_'s arena list is found among its slices (one of
// pointers and one of small numbers are not it), and where it lies is
// kept; the arena's mappings are the Go heap, a thread's stack pointer in
// them notwithstanding; the runtime's other mapping is the Go runtime's;
// in a cgo program a traced range in the arena is its call site's but
// counted once, in the Go heap.
func TestClassifyGo(t *testing.T) {
	vmas := mustParse(t, goSmaps)
	const mheap = 0x5a0000
	base := uint64(0xc000000000)
	arenaIdx := (base - arenaBaseOffset) / heapArenaBytes // wraps, as the runtime's does
	mem := fakeMemory{words: map[uint64]uint64{
		// []*mspan: two pointers.
		mheap + 0: 0x7f0000000100, mheap + 8: 2, mheap + 16: 2, 0x7f0000000100: 0x7f0000000200, 0x7f0000000108: 0x7f0000000300,
		// A slice of small numbers.
		mheap + 24: 0x7f0000000400, mheap + 32: 2, mheap + 40: 8, 0x7f0000000400: 1, 0x7f0000000408: 2,
		// allArenas: one arena.
		mheap + 48: 0x7f0000000500, mheap + 56: 1, mheap + 64: 4, 0x7f0000000500: arenaIdx,
	}}
	g := &goExe{mheap: mheap, mheapSize: 80}
	want := []Range{{0xc000000000, 0xc004000000}}
	for i := range 2 {
		if got := g.runtimeArenas(mheap, vmas, mem); !reflect.DeepEqual(got, want) {
			t.Errorf("reading %d: arenas %x, want %x", i, got, want)
		}
		if off := g.allArenas.Load(); off != 48+1 {
			t.Errorf("reading %d: list kept at %d, want 49", i, off)
		}
	}
	if got := alignedArenas(vmas); !reflect.DeepEqual(got, want) {
		t.Errorf("by alignment: arenas %x, want %x", got, want)
	}
	gh := &goHeap{arenas: want, source: GoHeapFromRuntime}
	sp := []uint64{0xc000100000} // a goroutine's stack, in a heap span
	heap := State{Reserved: 64 << 20, Committed: 4 << 20, Resident: 4 << 20}
	r := classify(vmas, sp, Options{}, gh, mem)
	if r.GoHeap != heap || r.GoHeapSource != GoHeapFromRuntime || r.GoRuntimeResident != 512<<10 ||
		r.StackResident != 12<<10 || r.HeapResident != 0 || r.AnonResident != 0 || r.FileResident != 800<<10 {
		t.Errorf("static: %+v", r)
	}
	o := Options{Glibc: true, Ranges: []Range{{0xc000000000, 0xc000400000}, {0x7f0000000000, 0x7f0000100000}}}
	r = classify(vmas, sp, o, gh, mem)
	if r.GoHeap != heap || r.AnonResident != 512<<10 || r.GoRuntimeResident != 0 || r.StackResident != 12<<10 {
		t.Errorf("cgo: %+v", r)
	}
	if st := r.Ranges[0]; st != (State{Reserved: 4 << 20, Committed: 4 << 20, Resident: 4 << 20}) {
		t.Errorf("cgo: the arena's traced range %+v", st)
	}
	// A mapping right below the arena, merged with it by the kernel: the
	// arena's part is read from pagemap.
	merged := strings.Replace(goSmaps, "c000000000-c000400000 rw-p 00000000 00:00 0\nRss:                4096 kB",
		"bffff00000-c000400000 rw-p 00000000 00:00 0\nRss:                5120 kB", 1)
	mem.res = map[Range]uint64{{0xc000000000, 0xc000400000}: 3 << 20}
	r = classify(mustParse(t, merged), sp, Options{}, gh, mem)
	heap.Resident = 3 << 20
	if r.GoHeap != heap || r.GoRuntimeResident != (512+2048)<<10 {
		t.Errorf("merged: %+v", r)
	}
}
