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

/* One ring-buffer record. 64 bytes, no implicit padding. */
struct event {
	__u64 time;
	__u64 addr;
	__u64 size;
	__u64 old_addr;
	__u64 old_size;
	__u64 call_site;
	__u32 pid;
	__u32 tid;
	__u8 kind;
	__u8 func;
	__u8 pad[2];
	__s32 stack_id; /* user stack in the stacks map; < 0: none */
};

/*
 * The outermost allocator call a thread is inside, from its entry probe to
 * its return probe. sp == 0 means none.
 */
struct inflight {
	__u64 sp;        /* stack pointer at entry: [sp] is the return address */
	__u64 call_site; /* that return address */
	__u64 size;
	__u64 old_addr;  /* realloc/mremap input; posix_memalign's out-pointer */
	__u64 old_size;  /* mremap */
	__s32 stack_id;
	__u8 func;
	__u8 drawn;      /* sampled mode: countdown holds a draw */
	__u8 pad[2];
	/*
	 * The outermost allocation wrapper in flight (operator new, strdup,
	 * asprintf, …): allocations inside it are charged to its caller.
	 * wsp == 0 means none.
	 */
	__u64 wsp;
	__u64 wsite;
	__s32 wstack;
	__u8 wpad[4];
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
