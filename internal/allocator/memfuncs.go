package allocator

import "strings"

// memoryFunctions are the functions a page fault in is charged to their
// caller (resident attribution): the C library's memory functions, the
// allocator's entry points (malloc's header writes, calloc's zeroing), and
// read(2) and stdio copying into a fresh buffer. The named allocation
// wrappers (DefaultWrappers) count too.
var memoryFunctions = []string{
	"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
	"memalign", "valloc", "pvalloc",
	"memset", "memcpy", "memmove", "mempcpy", "bzero", "explicit_bzero", "wmemset", "wmemcpy",
	"wmemmove", "bcopy", "strcpy", "strncpy", "stpcpy", "stpncpy", "strcat", "strncat",
	"read", "__read", "__read_nocancel", "pread", "pread64", "__pread64", "readv", "preadv",
	"preadv2", "recv", "recvfrom", "recvmsg", "fread", "fread_unlocked", "_IO_fread",
	"fgets", "fgets_unlocked", "getline", "getdelim", "__getdelim",
	// HotSpot's Unsafe memory functions: a direct ByteBuffer zeroed or
	// copied for the Java code that called them (docs/runtimes-jit.md).
	"Unsafe_SetMemory0", "Unsafe_CopyMemory0", "Unsafe_CopySwapMemory0",
	// Go's runtime clearing and copying memory for its callers.
	"runtime.memclrNoHeapPointers", "runtime.memmove", "runtime.memclrHasPointers",
	"runtime.typedmemmove", "runtime.mallocgc", "runtime.growslice", "runtime.makeslice",
	"runtime.rawstring", "runtime.rawbyteslice", "runtime.concatstrings", "runtime.slicebytetostring",
}

// memoryPrefixes are families of the same: glibc's IFUNC variants
// (__memset_avx2_unaligned_erms), its internal names (__libc_malloc,
// _int_malloc), the _chk checked forms, jemalloc's and tcmalloc's
// internals, Go's system calls and reads.
var memoryPrefixes = []string{
	"__memset_", "__memcpy_", "__memmove_", "__mempcpy_", "__wmemset_", "__bzero",
	"__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign", "__libc_read",
	"__libc_pread", "_int_malloc", "_int_realloc", "_int_memalign", "sysmalloc", "tcache_",
	"je_", "tc_", "_IO_file_read", "_IO_file_xsgetn", "_IO_new_file_underflow", "__underflow",
	"__uflow", "_IO_getline", "runtime.mallocgc", "runtime.memclr", "runtime.memmove",
	// Go's reads: the kernel's copy faults in the system call, charged to
	// whoever called os.(*File).Read, os.ReadFile, io.ReadAll or a
	// connection's Read, past the syscall and poll packages between.
	"internal/runtime/syscall/", "runtime/internal/syscall.", "syscall.", "golang.org/x/sys/unix.",
	"internal/poll.", "os.(*File).Read", "os.(*File).read", "os.(*File).pread", "os.ReadFile",
	"io.ReadAll", "io.ReadFull", "io.ReadAtLeast", "net.(*netFD).Read", "net.(*netFD).read", "net.(*conn).Read",
}

var memoryNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range memoryFunctions {
		m[n] = true
	}
	for _, n := range DefaultWrappers {
		m[n] = true
	}
	return m
}()

// MemoryFunction reports whether a page fault in the function named name
// is charged to its caller.
func MemoryFunction(name string) bool {
	if memoryNames[name] {
		return true
	}
	// HotSpot's memset and memcpy: Copy::fill_to_memory_atomic zeroes a
	// direct ByteBuffer's memory for Unsafe_SetMemory0, Copy::conjoint_*
	// and Copy::disjoint_* copy. A name is parsed only where "Copy" is
	// a part of it (node has 100k other C++ names).
	if strings.Contains(name, "4Copy") {
		if parts := cxxName(name); len(parts) == 2 && parts[0] == "Copy" {
			return true
		}
	}
	for _, p := range memoryPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// MemoryLibrary reports whether a file that defines the named functions is
// a C library or an allocator (it defines malloc or memset): its code no
// symbol names is its own internals (glibc's memset variants and
// _int_malloc have no exported names), charged to its caller as well.
func MemoryLibrary(defines func(name string) bool) bool {
	return defines("malloc") || defines("memset")
}

// AllocatorLibrary reports whether a file that defines the named
// functions is an allocator and nothing else (it defines malloc but not
// the C library's memset: jemalloc, tcmalloc, mimalloc): all of its code
// serves its allocation functions, which may tail-call unnamed parts of it.
func AllocatorLibrary(defines func(name string) bool) bool {
	return defines("malloc") && !defines("memset")
}
