// Package footprint reads what the kernel charges a process for its memory
// (its RSS, from /proc/PID/status) and explains it mapping by mapping (from
// /proc/PID/smaps): the allocator's heap, anonymous mappings made by traced
// mmap calls, a Go program's heap and runtime, thread stacks, file
// mappings, and what none of those explains. It reads the kernel only (and
// a process's memory through /proc/PID/mem): no probe, no trap, nothing
// per allocation. It imports nothing from eBPF and nothing of the
// aggregate, so it is tested on canned readings.
package footprint

// Range is an anonymous mapping memtrace tracked from an mmap call,
// [Start, End), page-aligned.
type Range struct {
	Start, End uint64
}

// State is a range's address space by NMT's meanings: Reserved is what is
// mapped, Committed the part that is accessible (not PROT_NONE), Resident
// the part in RAM now.
type State struct {
	Reserved, Committed, Resident uint64
}

// Reading is one process's footprint at one moment.
type Reading struct {
	// The kernel's RSS and its parts, as /proc/PID/status has them
	// (RssAnon, RssFile, RssShmem); RSS is their sum.
	RSS, RSSAnon, RSSFile, RSSShmem uint64
	// Swap is the process's memory swapped out (VmSwap). PSS is its
	// proportional set size: its RSS with each shared page divided among
	// the processes that map it (smaps' Pss lines, or smaps_rollup).
	Swap, PSS uint64
	// HeapResident is the allocator's memory in RAM: glibc's [heap], its
	// arenas and large-block mappings; every untracked anonymous mapping
	// when the allocator is not glibc's (jemalloc, tcmalloc, mimalloc) and
	// the program no Go program without libc (GoHeap, GoRuntimeResident).
	HeapResident uint64
	// AnonResident is the resident part of tracked mmap ranges that are
	// no thread's stack.
	AnonResident uint64
	// StackResident is the resident part of thread stacks.
	StackResident uint64
	// GoHeap is a Go program's heap arenas (goroutine stacks included:
	// they are allocated from heap spans) by NMT's states; zero for other
	// programs. GoHeapSource says how the arenas were found: "runtime"
	// (the runtime's own list, mheap_.allArenas, read from the process:
	// exact), "addresses" (a stripped executable: the anonymous mappings
	// in the runtime's hint zones, a heuristic), "" (not a Go program).
	GoHeap       State
	GoHeapSource string
	// GoRuntimeResident is a Go program's other anonymous memory no
	// traced mmap call made, no stack and no .bss: the runtime's off-heap
	// metadata (spans, arena headers, GC bitmaps, the page allocator's
	// summaries) and whatever the Go code maps itself with syscall.Mmap.
	GoRuntimeResident uint64
	// ManagedHeaps are a runtime's own heaps (a JVM's, found by its
	// performance counters): what part of the memory above they are.
	ManagedHeaps []ManagedHeap
	// FileResident is the resident part of file mappings (shared memory
	// included), private copies of their pages too.
	FileResident uint64
	// Unexplained is RSS less everything above: anonymous memory none of
	// those categories accounts for (mappings made before attach that are
	// not the allocator's, the dynamic loader's own, special mappings),
	// and the drift between status and smaps. Never negative: 0 when
	// smaps adds up to more than status.
	Unexplained uint64
	// Ranges holds the state of each tracked range, in the order given.
	Ranges []State
	// Cgroup is the process's cgroup (v2) path, and CgroupMemory that
	// cgroup's memory.current: what the cgroup is charged, all its
	// processes and its page cache included. "" and 0 when unknown.
	Cgroup       string
	CgroupMemory uint64
	// Rollup: the reading is RSS, Swap and PSS alone (ReadRollup): the
	// breakdown by kind of memory was not read.
	Rollup bool
	// Attached: memtrace attached to the process while it ran (-p), so
	// its heap holds blocks memtrace never saw allocated; they count as
	// resident and not as live. Set by the caller.
	Attached bool
}

// Options say what Read needs to know of the process.
type Options struct {
	// Ranges are the tracked anonymous mappings, sorted by Start, not
	// overlapping.
	Ranges []Range
	// Glibc: the process's malloc is glibc's. Its mappings are then
	// recognized by their headers; otherwise every untracked anonymous
	// mapping that is no stack is taken to be the allocator's.
	Glibc bool
	// Detect: the caller does not know the allocator (whole host); Read
	// takes it for glibc's unless the process maps jemalloc, tcmalloc or
	// mimalloc.
	Detect bool
	// Python: the process runs CPython (Read finds it by the mapped
	// interpreter). pymalloc's arenas are anonymous mappings made inside
	// its probed functions, so no traced mmap tracks them: its untracked
	// anonymous mappings that are no stack count as the allocator's heap.
	Python bool
}

// OptionsFor are the options of a process whose malloc binds to the
// module malloc ("": not known, as whole host), with its tracked ranges.
func OptionsFor(malloc string, ranges []Range) Options {
	if malloc == "" {
		return Options{Ranges: ranges, Detect: true}
	}
	return Options{Ranges: ranges, Glibc: isLibc(malloc)}
}
