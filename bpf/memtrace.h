/*
 * Types and constants shared between the BPF programs and Go. Constants Go
 * needs are enums, not #defines, so that the object's BTF carries them:
 * bpf2go -type turns them into Go constants for tracer/, and
 * tracer/layout_test.go checks event/ and unwind/ (which import nothing
 * from eBPF) against them.
 */
#ifndef MEMTRACE_H
#define MEMTRACE_H

/* The deepest stack kept (tracer.MaxStackDepth). */
enum stack_limit {
	MAX_STACK = 127,
};

/* What an event did; event.Kind in Go has the same values. */
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
	KIND_REFAULT = 14, /* a fault made the page at addr (size bytes) resident again: its old sample is gone */
	KIND_MOVED = 15,   /* an mremap inside an allocator call moved old_size bytes at old_addr to addr */
	KIND_PY_CODE_FREED = 16, /* code_dealloc freed the code object at addr, whose tag a walk had read */
};

/* Which allocator entry point; event.Func in Go has the same values. */
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

/*
 * A malloc family func_id or'ed with FUNC_PY is CPython's (pymalloc:
 * PyObject_Malloc, PyMem_Malloc, ...; event.FuncPython): it acts as the
 * function in its low bits, and its events say the block is Python's.
 * Marks (FUNC_MARK + index) stay below FUNC_PY.
 */
enum func_domain {
	FUNC_PY = 0x80,
	FUNC_BASE_MASK = 0x7f,
	/*
	 * CPython's code_dealloc (PyCode_Type's tp_dealloc), entry only: a
	 * code object is freed, and its tag is no longer cached (python.h).
	 * No malloc family function: its base is none of enum func_id.
	 */
	FUNC_PY_CODE_FREE = 0xff,
	/*
	 * pymalloc's allocate_from_new_pool, where a build inlines pymalloc's
	 * fast path (Debian's python3.11): it returns the first block of the
	 * pool it opened, and the pool (that block rounded down to the pool
	 * size, from the attach cookie: FUNC_COOKIE_POOL_SHIFT) is reported
	 * as one Python block. No malloc family function either.
	 */
	FUNC_PY_POOL = 0xfe,
};

/*
 * The session program's attach cookie: the function (enum func_id) in the
 * low 32 bits, the bytes of its code from the probe on in the high 32
 * (in_outer: which code a skipped call runs).
 */
enum func_cookie {
	FUNC_COOKIE_MASK = 0xffffffff,
	FUNC_COOKIE_ID = 0xff, /* the function's id (enum func_id, FUNC_PY's bit included) */
	/*
	 * The function takes a context first (pymalloc's own _PyObject_Malloc,
	 * _PyObject_Free...): each argument is one register later.
	 */
	FUNC_COOKIE_CTX = 0x100,
	/* FUNC_PY_POOL's pool size: 1 << these 5 bits. */
	FUNC_COOKIE_POOL_SHIFT = 16,
	FUNC_COOKIE_POOL_MASK = 0x1f,
	FUNC_COOKIE_LEN_SHIFT = 32,
};

/*
 * mt_jvm_entry's attach cookie: the low byte is which argument holds the
 * category (2 or 3), the high 32 bits how many bytes of code follow the probe.
 */
enum jvm_cookie {
	JVM_COOKIE_ARG_MASK = 0xff,
	JVM_COOKIE_LEN_SHIFT = 32,
};

/* event.flags */
enum event_flag {
	EVENT_STACK_COMPLETE = 1, /* the unwind reached the thread's outermost frame */
	/*
	 * The walk met a file whose table was not loaded yet: the frame there
	 * was charged as it was (no wrapper skipped past it), and the stack
	 * followed frame pointers from there.
	 */
	EVENT_NO_TABLE = 1 << 7,
};

/*
 * event.flags bits 1-6: 1 + the JVM's NMT category (MEMFLAGS) of the
 * allocation, 0 for none: set when HotSpot's os::malloc or os::realloc made
 * the call (mt_jvm_entry).
 */
enum event_cat {
	EVENT_CAT_SHIFT = 1,
	EVENT_CAT_MAX = 63, /* HotSpot has ~30 categories */
	EVENT_CAT_MASK = 63,
};

/*
 * One ring-buffer record. 72 bytes, no implicit padding. With a stack
 * (--detail, sampled mode) the record is followed by the stack's return
 * addresses, the allocator's caller first; the record's length gives their
 * count and `charged` the index of the charged call site among them.
 */
struct event {
	__u64 time;      /* bpf_ktime_get_ns() for code_event and proc_event; 0 otherwise (the reader stamps) */
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
	__u8 flags;      /* enum event_flag, enum event_cat */
	__u8 charged;    /* with a stack: the charged call site's index in it */
	__s32 stack_id;  /* the probes: -1, or the count of Python frames after the native stack (python.h); user space numbers stacks */
};

/*
 * The compact records of the events that need no more, told apart from
 * struct event and from each other by their length (no implicit padding).
 * Allocations without a stack and frees are most events, and the ring's
 * cost is mostly its bytes: a record's cache lines were last written a
 * whole ring ago. In all old_addr and old_size are 0, the time is the
 * reader's, and there is no stack. small_event: 48 bytes, the rest of
 * them (an address at or above 2^48, a size at or above 2^32, a call site
 * apart from the leaf: a wrapper's caller).
 */
struct small_event {
	__u64 addr;
	__u64 size;
	__u64 call_site;
	__u64 leaf;
	__u32 pid;
	__u32 tid;
	__u8 kind;
	__u8 func;
	__u8 flags;
	__u8 pad[5];
};

/*
 * An address below 2^48 (every user address, but under 5-level paging),
 * with the kind and the function in its top 16 bits: tag_addr.
 */
enum tag_addr {
	TAG_ADDR_BITS = 48,
};
#define tag_addr(addr, kind, func) ((addr) | (__u64)(kind) << TAG_ADDR_BITS | (__u64)(func) << (TAG_ADDR_BITS + 8))

/*
 * An allocation charged to its leaf (call_site == leaf: no wrapper), of
 * less than 4 GiB at a tagged address: most allocations. 32 bytes.
 */
struct site_event {
	__u64 tagged;  /* tag_addr(addr, kind, func) */
	__u64 call_site;
	__u32 size;
	__u32 pid;
	__u32 tid;
	__u8 flags;
	__u8 pad[3];
};

/* A free: no size, call site or flags either; a tagged address. 16 bytes. */
struct free_event {
	__u64 tagged;  /* tag_addr(addr, kind, func) */
	__u32 pid;
	__u32 tid;
};

/*
 * The pc a sampled fault is charged to when execve itself wrote the page:
 * the new program's arguments, environment and auxiliary vector, written
 * into its new stack while the task's user registers are still the old
 * program's (in the new address space its pc means nothing). No code is
 * ever mapped at address 1; user space names it (symbolize.ExecveFunction).
 */
enum fault_pc {
	FAULT_PC_EXECVE = 1,
};

/* A frame's pc whose bit 63 is set is exact (interrupted by a signal), not a return address. */
enum frame_bit {
	FRAME_EXACT_BIT = 63,
};
#define FRAME_EXACT (1ULL << FRAME_EXACT_BIT)

/*
 * One row of a file's unwind table (built by unwind/ in Go): from pc, a
 * file offset, up to the next row's pc the rule is this one.
 */
struct unwind_row {
	__u32 pc;
	__s16 cfa_off;
	__u8 kind;    /* bits 0-2: enum unwind_kind; enum row_flag */
	__s8 rbp_off8; /* with ROW_RBP_SAVED: rbp was saved at CFA + 8 * rbp_off8 */
};

enum unwind_kind {
	UNWIND_UNDEFINED = 0, /* cannot unwind here: the stack is truncated */
	UNWIND_RSP = 1,       /* CFA = rsp + cfa_off */
	UNWIND_RBP = 2,       /* CFA = rbp + cfa_off */
	UNWIND_PLT = 3,       /* CFA = rsp + 8 + ((rip & 15) >= cfa_off ? 8 : 0): see apply_row */
	UNWIND_DEREF_RBP = 4, /* CFA = *(rbp + cfa_off), caller's rbp = *rbp */
	UNWIND_SIGNAL = 5,    /* a signal trampoline: registers in the ucontext at rsp */
	UNWIND_END = 6,       /* the outermost frame: the stack is complete */
};

enum row_flag {
	ROW_KIND_MASK = 0x07,
	ROW_RBP_SAVED = 0x08,
	ROW_MEMFN = 0x20,   /* libc's memory functions, the allocator, read(2): a fault there charges its caller */
	ROW_ANON = 0x40,    /* no named function covers this code */
	ROW_WRAPPER = 0x80, /* an allocation wrapper: charge its caller */
};

/*
 * Offsets in a signal frame's ucontext at the trampoline's rsp
 * (uc_mcontext.gregs[REG_RBP], [REG_RSP], [REG_RIP]); unwind.Signal*Offset.
 */
enum uc_offset {
	UC_RBP = 120,
	UC_RSP = 160,
	UC_RIP = 168,
};

/* A mapped file, as the kernel names it: its superblock's dev_t and inode. */
struct file_key {
	__u64 dev;
	__u64 ino;
};

/* Where a file's rows sit in unwind_rows. */
struct unwind_file {
	__u32 first;
	__u32 count;
	__u32 flags; /* enum file_flag */
	__u32 pad;
};

enum file_flag {
	FILE_PENDING = 1,  /* user space was asked for the table and has not answered */
	FILE_NO_CFI = 2,   /* no unwind information: follow frame pointers */
	FILE_UNMARKED = 4, /* no row is a wrapper or anonymous: charging needs no lookup */
	FILE_NO_NAMES = 8, /* no named function in its code: unnamed frames in it lead to no named caller */
	FILE_ALLOCATOR = 16, /* an allocator library (jemalloc, …): all its code serves its allocation functions */
	FILE_LIBRARY = 32,   /* a shared library, not a program: its unnamed code is its own internals */
};

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
	/*
	 * The JVM (mt_jvm_entry): 1 + the category the last os::malloc or
	 * os::realloc entered on this thread asked for (0: none yet), and
	 * that function's code from the probe on: [jvm_pc, jvm_pc + jvm_len).
	 */
	__u8 jvm_cat;
	/*
	 * noret: a session entry skipped this call's return (sampled mode,
	 * not sampled); whether it is still in progress is decided only for an
	 * anonymous mmap below it (in_outer, outer_frame).
	 */
	__u8 noret;
	__u8 presampled; /* a session entry sampled and counted this call */
	__u8 pad[3];
	__u32 jvm_len;
	__u32 pad2;
	__u64 jvm_pc;
	/*
	 * Sampled mode: bytes this thread may still allocate before its next
	 * sample, a draw from an exponential distribution (a Poisson process
	 * over the thread's allocated bytes).
	 */
	__s64 countdown;
	__u64 code_end;  /* with noret: the end of its function's code */
	__u64 ip;        /* with noret: where the call was probed: its code is [ip, code_end) */
	/*
	 * An anonymous mmap in flight below a noret call: the noret call's
	 * sp, restored when its return finds the mmap was made inside it.
	 */
	__u64 outer_sp;
	/*
	 * The thread's last allocator caller whose charged frame is known
	 * (report_site), and the epoch and address space that holds for: a
	 * loop's next allocation from there needs no lookup. memo_off 0: the
	 * caller is charged itself (the frame cache said so); else it is a
	 * wrapper whose return address is at sp + memo_off - 8 (its CFA is
	 * sp-based), and its caller at memo_site was charged itself.
	 */
	__u64 memo_pc, memo_epoch, memo_mm;
	__u64 memo_site;
	__s64 memo_off;
	/*
	 * The thread's bpf_get_current_pid_tgid() and address space, set at
	 * each lookup of this state (thread_state): the return program needs
	 * both again, and two helper calls fewer is ~10 ns.
	 */
	__u64 cur_id, cur_mm;
	/*
	 * With resident attribution: an mremap made inside this call (glibc's
	 * realloc of a block it mapped itself) at sp nested_sp (0: none), of
	 * the nested_old_size bytes at nested_old_addr. Its return tells
	 * where their resident pages went (KIND_MOVED): they stay resident,
	 * charged to who made them so.
	 */
	__u64 nested_sp, nested_old_addr, nested_old_size;
};

/* sampled_hint's size in sampled mode: 4 MiB of counters (tracer.SampledHints). */
enum sampled_hints {
	SAMPLED_HINTS = 1 << 20,
};

/*
 * thread_slots' largest size (tracer.ThreadSlotsMax): a 184-byte slot per
 * thread id, 11.5 MiB; the loader uses kernel.pid_max when smaller.
 */
enum thread_slots_max {
	THREAD_SLOTS_MAX = 1 << 16,
};

/* A library dlopen loaded: addr is its load bias, path its name. */
struct code_event {
	struct event e;
	char path[256];
};

/* The kernel's TASK_COMM_LEN, terminating NUL included (tracer.CommLen). */
enum comm_len {
	COMM_LEN = 16,
};

/*
 * A process event of the whole-host mode. For KIND_EXEC e.size is 1 when
 * the process passes the --comm/--cgroup filters (its allocator must be
 * found), 0 otherwise (its statistics restart all the same).
 */
struct proc_event {
	struct event e;
	char comm[COMM_LEN]; /* the thread group leader's comm */
};

/*
 * KIND_EXEC's record: a proc_event and the program that was executed, so
 * that a process gone before user space reads its mappings still has its
 * program's call sites resolved (symbolize.Resolver.AddProgram). The
 * program is left 0 for a process that fails --comm or --cgroup.
 */
struct exec_event {
	struct proc_event p;
	__u64 start_code; /* the program's code, as the ELF loader placed it */
	__u64 end_code;
	__u64 dev;        /* the program file's device (the kernel's dev_t), inode and size */
	__u64 ino;
	__u64 size;
	char path[256];   /* its name as the exec found it (binprm's interp) */
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
