// Package event holds the plain-data form of what the probes report: one
// Event per allocator call that matters. The tracer decodes ring-buffer
// records into Events; aggregate consumes them. Nothing here knows about eBPF,
// so recorded or synthetic streams replay through the same code as live ones.
package event

import "strings"

// Kind says what an event did to the process's memory. The values match
// enum event_kind in bpf/memtrace.h (tracer's TestConstants).
type Kind uint8

const (
	// Alloc: a block of Size bytes now lives at Addr.
	Alloc Kind = 1
	// Free: the block at Addr was released.
	Free Kind = 2
	// Realloc: the block at OldAddr (0 = none) was resized to Size bytes at
	// Addr. Addr == 0 means the call returned NULL: with Size == 0 and
	// OldAddr != 0 that released OldAddr; otherwise it failed and OldAddr
	// stays live.
	Realloc Kind = 3
	// Mmap: an anonymous mapping of Size bytes at Addr.
	Mmap Kind = 4
	// Munmap: [Addr, Addr+Size) was unmapped.
	Munmap Kind = 5
	// Mremap: the mapping [OldAddr, OldAddr+OldSize) now is [Addr, Addr+Size).
	Mremap Kind = 6
	// CodeMap: dlopen loaded the library at Path with load bias Addr. It
	// changes no statistics; it lets call sites in the library resolve
	// after dlclose.
	CodeMap Kind = 7
	// Exec (whole host): the process executed a new program; its old
	// statistics are void. Size is 1 when it passes the --comm/--cgroup
	// filters. Comm is the new program's.
	Exec Kind = 8
	// Exit (whole host): the process's last thread exited; every event of
	// the process came before this one. Comm is the process's.
	Exit Kind = 9
	// Mark: the program called a --mark function. Label is its first
	// argument read as a C string ("" when it is none); Size is the
	// function's index among the --mark functions.
	Mark Kind = 10
	// Fault: a sampled write fault on the page at Addr (Size bytes), which
	// may have made it resident; CallSite is who is charged for it (the
	// first frame outside libc's memory functions and the allocator).
	// Whether the page is resident anonymous memory is for Unresident
	// events to say: until one comes, it is charged.
	Fault Kind = 12
	// Unresident: the page at Addr, sampled by a Fault, is no longer
	// resident anonymous memory (unmapped, released, swapped out,
	// reclaimed, or never was: a file page). User space finds it in
	// /proc/PID/pagemap and records it as an event, so that a replay
	// charges the same pages. Addr 0 (never a sampled page) is a check
	// that found every page resident: its time alone.
	Unresident Kind = 13
	// Refault: a fault not sampled made the Size bytes at Addr resident
	// again, after they were released: a sampled page among them is no
	// longer resident by its sampled fault, and is uncharged. The probes
	// tell only when a sampled page may be there (bpf/resident.h).
	Refault Kind = 14
	// Moved: an mremap made inside an allocator call (glibc's realloc of a
	// block it mapped) moved the OldSize bytes at OldAddr to Addr. Only
	// resident attribution reads it: the sampled pages there move with
	// their mapping (the program's own mremap is an Mremap, which moves
	// them too).
	Moved Kind = 15
)

// String names the kind as docs and JSON do.
func (k Kind) String() string {
	switch k {
	case Alloc:
		return "alloc"
	case Free:
		return "free"
	case Realloc:
		return "realloc"
	case Mmap:
		return "mmap"
	case Munmap:
		return "munmap"
	case Mremap:
		return "mremap"
	case CodeMap:
		return "code_map"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	case Mark:
		return "mark"
	case Fault:
		return "fault"
	case Unresident:
		return "unresident"
	case Refault:
		return "refault"
	case Moved:
		return "moved"
	}
	return "unknown"
}

// Func identifies the allocator entry point that produced an event. The
// values match enum func_id in bpf/memtrace.h (tracer's TestConstants).
type Func uint8

const (
	FuncMalloc Func = iota + 1
	FuncCalloc
	FuncRealloc
	FuncReallocarray
	FuncPosixMemalign
	FuncAlignedAlloc
	FuncMemalign
	FuncValloc
	FuncPvalloc
	FuncFree
	FuncMmap
	FuncMunmap
	FuncMremap
	// FuncWrapper marks a probe on an allocation wrapper (operator new,
	// strdup, …); it produces no events of its own.
	FuncWrapper
	// FuncDlopen: the return probe on dlopen, producing CodeMap events.
	FuncDlopen
	// FuncMark: a --mark function, entry probe only. Its attach cookie is
	// FuncMark + the function's index among the --mark functions.
	FuncMark
)

var funcNames = [...]string{
	FuncMalloc:        "malloc",
	FuncCalloc:        "calloc",
	FuncRealloc:       "realloc",
	FuncReallocarray:  "reallocarray",
	FuncPosixMemalign: "posix_memalign",
	FuncAlignedAlloc:  "aligned_alloc",
	FuncMemalign:      "memalign",
	FuncValloc:        "valloc",
	FuncPvalloc:       "pvalloc",
	FuncFree:          "free",
	FuncMmap:          "mmap",
	FuncMunmap:        "munmap",
	FuncMremap:        "mremap",
	FuncWrapper:       "wrapper",
	FuncDlopen:        "dlopen",
	FuncMark:          "mark",
}

// FuncPython marks a function of CPython's object and memory domains
// (pymalloc: PyObject_Malloc, PyMem_Malloc, ...), or'ed into the malloc
// family function it acts as. Python's garbage collector owns these blocks,
// not the program's pointers, so the leak check does not judge them. The
// value matches FUNC_PY in bpf/memtrace.h; marks stay below it.
const FuncPython Func = 0x80

// The pymalloc functions as probes and events name them.
const (
	FuncPyMalloc  = FuncPython | FuncMalloc
	FuncPyCalloc  = FuncPython | FuncCalloc
	FuncPyRealloc = FuncPython | FuncRealloc
	FuncPyFree    = FuncPython | FuncFree
)

// FuncPyCodeFree is CPython's code_dealloc (PyCode_Type's tp_dealloc),
// probed at entry: a code object is freed, and the probes forget the tag
// they kept for it (bpf/python.h). It produces no events; it is no
// malloc family function (its base is none of the Funcs above).
const FuncPyCodeFree Func = 0xff

// FuncPyPool is pymalloc's allocate_from_new_pool, probed where the
// interpreter inlines pymalloc's fast path into its callers (Debian's
// python3.11), so that its small objects reach no probe: each pool it
// opens is one Python block of the pool's size (16 KiB), charged to the
// line that opened it. Its base is no malloc family function.
const FuncPyPool Func = 0xfe

// Base is the malloc family function f acts as (f itself for all but
// Python's).
func (f Func) Base() Func { return f &^ FuncPython }

// Python reports whether f is one of pymalloc's functions.
func (f Func) Python() bool { return f&FuncPython != 0 && f.Base() <= FuncFree || f == FuncPyPool }

// Mark reports whether f is a --mark function's (FuncMark + its index).
func (f Func) Mark() bool { return f >= FuncMark && f&FuncPython == 0 }

// String is the C name of the function (the PyObject_ one for pymalloc's).
func (f Func) String() string {
	switch f {
	case FuncPyCodeFree:
		return "code_dealloc"
	case FuncPyPool:
		return "allocate_from_new_pool"
	}
	if f.Python() {
		return "PyObject_" + strings.ToUpper(f.Base().String()[:1]) + f.Base().String()[1:]
	}
	if int(f) < len(funcNames) && funcNames[f] != "" {
		return funcNames[f]
	}
	return "unknown"
}

// FrameExact marks a stack frame whose pc was interrupted by a signal.
const FrameExact = uint64(1) << 63

// Event is one allocator call as seen by the probes.
type Event struct {
	// Time is the kernel's monotonic clock, in ns. The probes read it only
	// for CodeMap, Exec and Exit events; the others (allocator calls and
	// marks) the reader places between the moment it last found the ring
	// empty and the moment it read their batch (tracer's Drainer.Poll).
	Time uint64
	// Addr is the block or mapping the call produced or released.
	Addr uint64
	// Size is the requested size in bytes (nmemb*size for calloc).
	Size uint64
	// OldAddr and OldSize describe the input block of realloc and mremap.
	OldAddr uint64
	OldSize uint64
	// CallSite is the charged call site: the return address into the first
	// frame outside the allocator and the allocation wrappers.
	CallSite uint64
	// Leaf is the return address into the allocator's immediate caller
	// (CallSite itself when no wrapper was skipped; 0 when unknown).
	Leaf uint64
	// Stack, when the probes unwound one (--detail, sampled mode), holds
	// the return addresses from CallSite outwards. A frame with bit 63 set
	// (FrameExact) is an exact pc interrupted by a signal, not a return
	// address. It is only valid during the callback that receives the event.
	Stack []uint64
	// StackComplete: the unwind reached the thread's outermost frame.
	StackComplete bool
	// NoTable: the walk met code whose unwind table was still being
	// built (memtrace does not wait for tables): CallSite is the frame
	// there, wrappers past it were not skipped, and Stack followed frame
	// pointers from it (docs/unwinding.md, "Before the tables").
	NoTable bool
	// JVMCategory is 1 + the JVM's NMT category (HotSpot's MEMFLAGS) that
	// os::malloc or os::realloc asked for when it made this allocation
	// call; 0 when none did. Its name is the process's (aggregate's
	// SetJVMCategories).
	JVMCategory uint8
	PID         uint32
	TID         uint32
	Kind        Kind
	Func        Func
	// StackID numbers the user stack (--detail) among those the tracer
	// has seen (see tracer.Stacks); -1 when no stack is kept.
	StackID int32
	// Path is the library of a CodeMap event, and the program an Exec
	// event's process executed, by the name the exec found it.
	Path string
	// Comm is the process's command name in Exec and Exit events.
	Comm string
	// Label is a Mark event's label.
	Label string
	// Program is where an Exec event's program was loaded; nil for other
	// events and in recordings.
	Program *Program
}

// Program is the program a process executed: its code as the ELF loader
// placed it and the file's identity. A process that exits before its
// mappings can be read still has its program's call sites resolved
// through it (symbolize.Resolver.AddProgram).
type Program struct {
	Start, End uint64 // [start_code, end_code) of the process's mm
	Dev, Ino   uint64 // the file's device, as stat(2) encodes it, and inode
	Size       uint64 // the file's size in bytes
}
