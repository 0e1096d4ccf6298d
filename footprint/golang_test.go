package footprint

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadGoHeap reads a Go program holding 192 MiB of slices (the
// resident fixture, built with the Go toolchain): its arenas are found
// from the runtime's own list, or, its symbol table stripped, by their
// alignment; either way the Go heap resident is what the runtime says its
// spans hold, and the reading adds up to the RSS with next to nothing
// unexplained.
func TestReadGoHeap(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain:", err)
	}
	for _, tc := range []struct {
		name, ldflags, source string
	}{
		{"symbols", "", GoHeapFromRuntime},
		{"stripped", "-s -w", GoHeapFromAddresses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "resident_go")
			build := exec.Command("go", "build", "-ldflags="+tc.ldflags, "-o", bin, ".")
			build.Dir = filepath.Join("..", "testdata", "resident_go")
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
			// Resident: the spans in use, every page written, and no more
			// than the free spans not yet given back.
			inuse := ms.inuse + ms.stacks
			if r.GoHeap.Resident < inuse || r.GoHeap.Resident > ms.sys-ms.released+ms.stacks {
				t.Errorf("go heap resident %d, want from in use %d to unreleased %d",
					r.GoHeap.Resident, inuse, ms.sys-ms.released+ms.stacks)
			}
			if r.GoHeap.Resident < 192<<20 || r.HeapResident != 0 || r.AnonResident != 0 {
				t.Errorf("go heap resident %d, heap %d, mmap %d: want the 192 MiB kept, 0, 0",
					r.GoHeap.Resident, r.HeapResident, r.AnonResident)
			}
			sum := r.GoHeap.Resident + r.GoRuntimeResident + r.StackResident + r.FileResident + r.Unexplained
			if sum != r.RSS || r.Unexplained > r.RSS/100 {
				t.Errorf("parts add up to %d, RSS %d; unexplained %d: want at most 1%%", sum, r.RSS, r.Unexplained)
			}
		})
	}
}
