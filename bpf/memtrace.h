/* Types shared between the BPF programs and Go (through bpf2go -type). */
#ifndef MEMTRACE_H
#define MEMTRACE_H

/* What an event did; mirrors event.Kind in Go. */
enum event_kind {
	KIND_ALLOC = 1,
	KIND_FREE = 2,
	KIND_REALLOC = 3,
	KIND_MMAP = 4,
	KIND_MUNMAP = 5,
	KIND_MREMAP = 6,
	KIND_CODE_MAP = 7, /* dlopen loaded a library: struct code_event */
	KIND_EXEC = 8,     /* whole host: a process executed a program: struct proc_event */
	KIND_EXIT = 9,     /* whole host: a process (its last thread) exited: struct proc_event */
	KIND_MARK = 10,    /* --mark: a marked function was called: struct code_event, path = label */
	KIND_UNWIND_MISS = 11, /* a file has no unwind table yet: addr = pc, size = dev, old_addr = inode */
	KIND_FAULT = 12, /* a sampled write fault: the page at addr (size bytes) may have become resident */
};

/* Which allocator entry point; mirrors event.Func in Go. */
enum func_id {
	FUNC_MALLOC = 1,
	FUNC_CALLOC,
	FUNC_REALLOC,
	FUNC_REALLOCARRAY,
	FUNC_POSIX_MEMALIGN,
	FUNC_ALIGNED_ALLOC,
	FUNC_MEMALIGN,
	FUNC_VALLOC,
	FUNC_PVALLOC,
	FUNC_FREE,
	FUNC_MMAP,
	FUNC_MUNMAP,
	FUNC_MREMAP,
	FUNC_WRAPPER,
	FUNC_DLOPEN,
	FUNC_MARK, /* --mark: the cookie is FUNC_MARK + the function's index */
};

/* event.flags */
#define EVENT_STACK_COMPLETE 1 /* the unwind reached the thread's outermost frame */

/*
 * One ring-buffer record. 72 bytes, no implicit padding. With a stack
 * (--detail, sampled mode) the record is followed by the stack's return
 * addresses, charged call site first; the record's length gives their count.
 */
struct event {
	__u64 time;
	__u64 addr;
	__u64 size;
	__u64 old_addr;
	__u64 old_size;
	__u64 call_site; /* the charged call site: the first frame outside the allocation wrappers */
	__u64 leaf;      /* the allocator's immediate caller (the return address into it) */
	__u32 pid;
	__u32 tid;
	__u8 kind;
	__u8 func;
	__u8 flags;      /* EVENT_* */
	__u8 pad;
	__s32 stack_id;  /* unused by the probes (-1); user space numbers stacks */
};

/* A frame's pc whose bit 63 is set is exact (interrupted by a signal), not a return address. */
#define FRAME_EXACT (1ULL << 63)

/*
 * One row of a file's unwind table (built by unwind/ in Go): from pc, a
 * file offset, up to the next row's pc the rule is this one.
 */
struct unwind_row {
	__u32 pc;
	__s16 cfa_off;
	__u8 kind;    /* bits 0-2: enum unwind_kind; ROW_* flags */
	__s8 rbp_off8; /* with ROW_RBP_SAVED: rbp was saved at CFA + 8 * rbp_off8 */
};

enum unwind_kind {
	UNWIND_UNDEFINED = 0, /* cannot unwind here: the stack is truncated */
	UNWIND_RSP = 1,       /* CFA = rsp + cfa_off */
	UNWIND_RBP = 2,       /* CFA = rbp + cfa_off */
	UNWIND_PLT = 3,       /* CFA = rsp + 8 + ((rip & 15) >= cfa_off ? 8 : 0) */
	UNWIND_DEREF_RBP = 4, /* CFA = *(rbp + cfa_off), caller's rbp = *rbp */
	UNWIND_SIGNAL = 5,    /* a signal trampoline: registers in the ucontext at rsp */
	UNWIND_END = 6,       /* the outermost frame: the stack is complete */
};

#define ROW_KIND_MASK 0x07
#define ROW_RBP_SAVED 0x08
#define ROW_MEMFN 0x20 /* libc's memory functions, the allocator, read(2): a fault there charges its caller */
#define ROW_ANON 0x40    /* no named function covers this code */
#define ROW_WRAPPER 0x80 /* an allocation wrapper: charge its caller */

/* A mapped file, as the kernel names it: its superblock's dev_t and inode. */
struct file_key {
	__u64 dev;
	__u64 ino;
};

/* Where a file's rows sit in unwind_rows. */
struct unwind_file {
	__u32 first;
	__u32 count;
	__u32 flags; /* FILE_* */
	__u32 pad;
};

#define FILE_PENDING 1  /* user space was asked for the table and has not answered */
#define FILE_NO_CFI 2   /* no unwind information: follow frame pointers */
#define FILE_UNMARKED 4 /* no row is a wrapper or anonymous: charging needs no lookup */

/*
 * The outermost allocator call a thread is inside, from its entry probe to
 * its return probe. sp == 0 means none.
 */
struct inflight {
	__u64 sp;        /* stack pointer at entry: [sp] is the return address */
	__u64 size;
	__u64 old_addr;  /* realloc/mremap input; posix_memalign's out-pointer */
	__u64 old_size;  /* mremap */
	__u8 func;
	__u8 drawn;      /* sampled mode: countdown holds a draw */
	__u8 pad[6];
	/*
	 * Sampled mode: bytes this thread may still allocate before its next
	 * sample, a draw from an exponential distribution (a Poisson process
	 * over the thread's allocated bytes).
	 */
	__s64 countdown;
};

/* A library dlopen loaded: addr is its load bias, path its name. */
struct code_event {
	struct event e;
	char path[256];
};

/*
 * A process event of the whole-host mode. For KIND_EXEC e.size is 1 when
 * the process passes the --comm/--cgroup filters (its allocator must be
 * found), 0 otherwise (its statistics restart all the same).
 */
struct proc_event {
	struct event e;
	char comm[16]; /* the thread group leader's comm */
};

/* Exact per-process counts of sampled mode, summed in BPF. */
struct alloc_counts {
	__u64 allocs;      /* successful allocation calls, realloc included */
	__u64 alloc_bytes; /* bytes they requested */
};

/* A sampled live block: its process and address. */
struct sample_key {
	__u64 addr;
	__u32 pid;
	__u32 pad;
};

#endif
