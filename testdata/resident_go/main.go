// Command resident_go is the Go fixture of resident attribution: Go's
// allocator is not malloc, so no allocator probe sees it; the page faults
// say which Go function made the memory resident. keepSlices keeps MIB
// MiB (default 192) of 1 MiB slices, each written a byte a page. With
// HOLD_MS set it sleeps that long before exiting. With WAIT set it reads a
// line before it allocates, and waits for its input to end after "ready".
// With MEMSTATS set it prints the runtime's own figures after "ready"
// (the footprint's Go heap is checked against them). With COPY_MIB set,
// copySlices first keeps that many MiB of 1 MiB slices written by copy:
// the pages fault in runtime.memmove, assembly without a frame of its own.
// With CHURN_MS set, it first keeps the slices and gives them back to the
// system over and over for that long (debug.FreeOSMemory: the runtime
// releases the pages with madvise, and the next round faults them again at
// the same addresses).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

var kept [][]byte

//go:noinline
func keepSlices(mib int) {
	for i := 0; i < mib; i++ {
		s := make([]byte, 1<<20)
		for j := 0; j < len(s); j += 4096 {
			s[j] = 1
		}
		kept = append(kept, s)
	}
}

//go:noinline
func copySlices(mib int) {
	source := make([]byte, 1<<20) // allocated only here: unwritten, it would be in use but not resident
	for i := 0; i < mib; i++ {
		s := make([]byte, len(source))
		copy(s, source)
		kept = append(kept, s)
	}
}

// churn keeps mib MiB and gives it back to the system, again and again for d.
func churn(mib int, d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
		keepSlices(mib)
		kept = nil
		debug.FreeOSMemory()
	}
}

func main() {
	mib := 192
	if len(os.Args) > 1 {
		mib, _ = strconv.Atoi(os.Args[1])
	}
	in := bufio.NewReader(os.Stdin)
	wait := os.Getenv("WAIT") != ""
	if wait {
		// Its runtime is set up: what it makes resident from here is the test's.
		fmt.Println("waiting")
		if _, err := in.ReadString('\n'); err != nil {
			os.Exit(1)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COPY_MIB")); err == nil {
		copySlices(n)
	}
	if ms, err := strconv.Atoi(os.Getenv("CHURN_MS")); err == nil {
		churn(mib, time.Duration(ms)*time.Millisecond)
	}
	keepSlices(mib)
	fmt.Println("ready")
	if os.Getenv("MEMSTATS") != "" {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("heap_sys %d heap_inuse %d heap_released %d stack_inuse %d\n",
			ms.HeapSys, ms.HeapInuse, ms.HeapReleased, ms.StackInuse)
	}
	if wait {
		io.Copy(io.Discard, in)
	}
	if ms, err := strconv.Atoi(os.Getenv("HOLD_MS")); err == nil {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, len(kept))
}
