//go:build ignore

/*
 * memtrace's probes: entry uprobes and return uprobes on the allocator of each
 * traced process. Every allocation, release and anonymous mapping that
 * succeeded is written to one ring buffer as a struct event. Per-event work is
 * kept small: the trap itself already costs most of a microsecond.
 */
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "memtrace.h"
#include "sample.h"

/* The helpers used (probe_read_user, task storage) require a GPL-compatible license. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAP_ANONYMOUS 0x20
#define PROT_EXEC 0x4
/* No allocation of this many bytes can succeed (x86-64's user address space). */
#define MAX_USER_SIZE (1ULL << 47)
#define MAP_FAILED ((__u64)-1)
/* Records (with their 8-byte header) within which a crossing still wakes. */
#define WAKEUP_WINDOW (32 * (sizeof(struct event) + 8))

/* The fields read for --comm and by the exit probe (CO-RE: offsets from the kernel's BTF). */
struct signal_struct {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));

/* The page of a process's uprobe trampolines (in_outer). */
struct xol_area {
	unsigned long vaddr;
} __attribute__((preserve_access_index));

struct uprobes_state {
	struct xol_area *xol_area;
} __attribute__((preserve_access_index));

struct mm_struct {
	struct uprobes_state uprobes_state;
	unsigned long start_code, end_code;
} __attribute__((preserve_access_index));

/*
 * What a return probe replaced: the return address (orig_ret_vaddr) that
 * was in the stack slot at stack, the thread's newest call first
 * (real_return in unwind.h).
 */
struct return_instance {
	unsigned long stack;
	unsigned long orig_ret_vaddr;
	struct return_instance *next;
} __attribute__((preserve_access_index));

struct uprobe_task {
	struct return_instance *return_instances;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;  /* the thread id */
	int tgid; /* the process id */
	__u64 start_time;
	struct mm_struct *mm;
	struct uprobe_task *utask;
	struct task_struct *group_leader;
	struct signal_struct *signal;
	char comm[COMM_LEN];
} __attribute__((preserve_access_index));

/* The fields that name the file a code address is mapped from. */
struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
	long long i_size;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

/* The exec being done: what sched_process_exec passes as its third argument. */
struct linux_binprm {
	struct file *file;
	const char *interp;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_pgoff;
	struct file *vm_file;
	unsigned long vm_flags; /* in an anonymous union since 6.3: CO-RE finds it */
} __attribute__((preserve_access_index));

/* The frames walked looking for the charged call site (MAX_STACK: memtrace.h). */
#define MAX_WRAPPER_FRAMES 8
/* The most Python frames kept (python.h), two words each after the native frames. */
#define MAX_PY_FRAMES 128
#define PY_WORDS (MAX_STACK + MAX_WRAPPER_FRAMES + 2 * MAX_PY_FRAMES)
/* PY_WORDS rounded up to a power of two: an index masked with it is in bounds (6.1's verifier). */
#define STACK_WORDS 512
/*
 * A chain that can still end in a charged name is followed further:
 * Debian's SQLite reaches sqlite3Malloc from its page cache through
 * stripped static functions, its named caller up to 11 frames above
 * malloc's caller.
 */
#define MAX_CHAIN_FRAMES 32
/*
 * Frames kept from a charged JIT frame on without --detail: enough to
 * pass the runtime's own JIT code (node's Buffer.alloc and FastBuffer, the
 * JDK's ByteBuffer.allocateDirect path) to the program's function.
 */
#define JIT_FRAMES 10
/* Binary search steps over a file's rows: tables of up to 2^24 rows. */
#define SEARCH_STEPS 24

/* Set by the loader before load. */
/* Wake the reader only when this many bytes wait: a wakeup per event costs more than the trap. */
const volatile __u64 wakeup_bytes = 1 << 20;
/*
 * --detail (and sampled mode): unwind the stack of each reported allocation,
 * keeping at most stack_depth frames from the charged call site on.
 */
const volatile __u32 stack_depth = 0;
/* Whole host: memtrace's own PID, whose calls are never traced. */
const volatile __u32 self_pid = 0;
/* --comm: only processes whose thread group leader has this comm. */
const volatile __u8 filter_comm = 0;
const volatile __u64 comm_filter[2] = {};
/* --cgroup: only tasks in the cgroup (v2) in cgroup_filter[0], or below it. */
const volatile __u8 filter_cgroup = 0;
/*
 * Whether sched_process_exit passes group_dead (recent kernels; not 6.12).
 * The loader clears it where the kernel's BTF says not (tracer/features.go):
 * there a raw tracepoint that reads a second argument is refused.
 */
const volatile __u8 exit_has_group_dead = 1;

/* Keeps the record types in the BTF for bpf2go -type. */
const struct event *unused_event __attribute__((unused));
const struct small_event *unused_small_event __attribute__((unused));
const struct free_event *unused_free_event __attribute__((unused));
const struct site_event *unused_site_event __attribute__((unused));
const struct code_event *unused_code_event __attribute__((unused));
const struct proc_event *unused_proc_event __attribute__((unused));
const struct exec_event *unused_exec_event __attribute__((unused));
const struct alloc_counts *unused_alloc_counts __attribute__((unused));
const struct sample_key *unused_sample_key __attribute__((unused));
const struct unwind_row *unused_unwind_row __attribute__((unused));
const struct file_key *unused_file_key __attribute__((unused));
const struct unwind_file *unused_unwind_file __attribute__((unused));
/* And the enums Go takes its constants from. */
const enum stack_limit *unused_stack_limit __attribute__((unused));
const enum event_kind *unused_event_kind __attribute__((unused));
const enum func_id *unused_func_id __attribute__((unused));
const enum comm_len *unused_comm_len __attribute__((unused));
const enum jvm_cookie *unused_jvm_cookie __attribute__((unused));
const enum func_cookie *unused_func_cookie __attribute__((unused));
const enum func_domain *unused_func_domain __attribute__((unused));
const enum event_flag *unused_event_flag __attribute__((unused));
const enum event_cat *unused_event_cat __attribute__((unused));
const enum frame_bit *unused_frame_bit __attribute__((unused));
const enum tag_addr *unused_tag_addr __attribute__((unused));
const enum unwind_kind *unused_unwind_kind __attribute__((unused));
const enum row_flag *unused_row_flag __attribute__((unused));
const enum uc_offset *unused_uc_offset __attribute__((unused));
const enum file_flag *unused_file_flag __attribute__((unused));
const enum exp_bits *unused_exp_bits __attribute__((unused));
const enum thread_slots_max *unused_thread_slots_max __attribute__((unused));
const enum sampled_hints *unused_sampled_hints __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

/*
 * Unwind tables: the rows of every file user space has built, each file's
 * rows contiguous and sorted (the loader sizes the array), and where each
 * file's rows are.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, struct unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 14);
	__type(key, struct file_key);
	__type(value, struct unwind_file);
} unwind_files SEC(".maps");



/* In-flight calls, per thread; freed with the thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inflight);
} inflight SEC(".maps");

/*
 * The same state in a slot per thread id (bpf_get_current_pid_tgid's, the
 * initial namespace's), for ids below the array's size (the loader sizes
 * it to kernel.pid_max, at most THREAD_SLOTS_MAX): an array lookup, which
 * the verifier inlines, where bpf_task_storage_get is a helper call
 * (measured: ~20 ns a lookup, two per allocation). A slot belongs to the
 * thread whose start time it holds, in the address space it holds: a
 * thread id used again is a new thread, whose state starts zeroed, as task
 * storage's would, and so does a thread after exec (a thread that execs
 * takes its leader's id and start time, and with them the slot of a leader
 * that may have been killed inside an allocator call). Threads with
 * higher ids keep theirs in inflight. Only the thread itself reads or
 * writes its slot: ids are unique among live threads.
 */
struct thread_slot {
	__u64 start_time;
	__u64 mm;
	struct inflight s;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, THREAD_SLOTS_MAX);
	__type(key, __u32);
	__type(value, struct thread_slot);
} thread_slots SEC(".maps");

/*
 * task_id is bpf_get_current_pid_tgid() of the current task t, from two
 * loads through its BTF pointer: the probes get the task once and take
 * everything from it, as each helper call they avoid costs ~8-14 ns
 * (measured, kernel 6.18).
 */
static __always_inline __u64 task_id(struct task_struct *t)
{
	return (__u64)(__u32)t->tgid << 32 | (__u32)t->pid;
}

/*
 * thread_state returns the state of the current thread t (thread_slots,
 * else inflight); with create, zeroed state when it has none yet, else NULL.
 */
static __always_inline struct inflight *thread_state(struct task_struct *t, int create)
{
	__u64 id = task_id(t);
	__u32 tid = (__u32)id;
	struct thread_slot *slot = bpf_map_lookup_elem(&thread_slots, &tid);
	struct inflight *s;
	__u64 start, mm = (__u64)t->mm;

	if (!slot) {
		s = bpf_task_storage_get(&inflight, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
		if (s) {
			s->cur_id = id;
			s->cur_mm = mm;
		}
		return s;
	}
	start = t->start_time;
	if (slot->start_time != start || slot->mm != mm) {
		if (!create)
			return 0;
		__builtin_memset(&slot->s, 0, sizeof(slot->s));
		slot->start_time = start;
		slot->mm = mm;
	}
	slot->s.cur_id = id;
	slot->s.cur_mm = mm;
	return &slot->s;
}

/* Events that did not fit in the ring, per process and in total. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} lost_by_pid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost_total SEC(".maps");

/*
 * Sampled mode: the sampled blocks still live, so that a free reaches user
 * space only when its block was sampled. The loader sizes it; entries of
 * exited processes are deleted by user space.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 20);
	__type(key, struct sample_key);
	__type(value, __u8);
} sampled SEC(".maps");

/*
 * Sampled mode: a counting filter in front of sampled, for frees. Each
 * sampled block counts one in the slot its process and address hash to
 * (sampled_hint_slot), from before it is in sampled until after it left;
 * a free whose slot is 0 is of no sampled block and needs no hash lookup
 * (an array lookup, which the verifier inlines, where the hash miss cost
 * ~50 ns a free: measured). Entries user space deletes (exited
 * processes) leave their counts: a slot can only say "maybe" wrongly.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SAMPLED_HINTS);
	__type(key, __u32);
	__type(value, __u32);
} sampled_hint SEC(".maps");

/* Set by the loader: sampled_hint's size - 1 (a power of two), 0 when not sampling. */
const volatile __u32 sampled_hint_mask = 0;

/*
 * Sampled mode: exact allocation counts per process (user space deletes
 * them at exit, and sums the CPUs' counts). Per CPU: every counted call
 * adds to them, and a shared counter's atomic adds cost more.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, struct alloc_counts);
} proc_counts SEC(".maps");

/* --cgroup: the cgroup whose tasks (and its descendants') are traced. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

static __always_inline void count_lost(__u32 pid)
{
	__u32 zero = 0;
	__u64 one = 1, *n;

	n = bpf_map_lookup_elem(&lost_total, &zero);
	if (n)
		*n += 1;
	n = bpf_map_lookup_elem(&lost_by_pid, &pid);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (bpf_map_update_elem(&lost_by_pid, &pid, &one, BPF_NOEXIST)) {
		/* Another CPU inserted it first. */
		n = bpf_map_lookup_elem(&lost_by_pid, &pid);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
}

/* sampled_hint_slot returns the counting filter's slot of a block, NULL when not sampling. */
static __always_inline __u32 *sampled_hint_slot(struct sample_key *k)
{
	__u32 i = (__u32)(((k->addr >> 4) ^ ((__u64)k->pid << 44)) * 0x9e3779b97f4a7c15ULL >> 32) & sampled_hint_mask;

	if (!sampled_hint_mask)
		return 0;
	return bpf_map_lookup_elem(&sampled_hint, &i);
}

/*
 * remember_sampled remembers a sampled block at addr so that its free is
 * reported. A block that cannot be remembered (the map is full) is still
 * reported, and its future free counts as lost.
 */
static __always_inline void remember_sampled(__u64 addr, __u32 pid)
{
	struct sample_key k = {.addr = addr, .pid = pid};
	__u32 *hint = sampled_hint_slot(&k);
	__u8 one = 1;

	/* Counted first: a free of the block, once malloc returned, then looks it up. */
	if (hint)
		__sync_fetch_and_add(hint, 1);
	if (bpf_map_update_elem(&sampled, &k, &one, BPF_ANY)) {
		if (hint)
			__sync_fetch_and_add(hint, -1);
		count_lost(k.pid);
	}
}

/* sampled_block decides an allocation at addr and remembers it when sampled. */
static __always_inline int sampled_block(struct inflight *s, __u64 addr, __u64 size)
{
	if (!sample(s, size))
		return 0;
	remember_sampled(addr, s->cur_id >> 32);
	return 1;
}

/* is_sampled reports whether addr is a sampled block, leaving it there. */
static __always_inline int is_sampled(__u64 addr, __u32 pid)
{
	struct sample_key k = {.addr = addr, .pid = pid};
	__u32 *hint = sampled_hint_slot(&k);

	if (hint && !*hint)
		return 0;
	return bpf_map_lookup_elem(&sampled, &k) != 0;
}

/* take_sampled reports whether addr was a sampled block, and forgets it. */
static __always_inline int take_sampled(__u64 addr, __u32 pid)
{
	struct sample_key k = {.addr = addr, .pid = pid};
	__u32 *hint = sampled_hint_slot(&k);

	if (hint && !*hint)
		return 0;
	if (bpf_map_delete_elem(&sampled, &k))
		return 0;
	if (hint)
		__sync_fetch_and_add(hint, -1);
	return 1;
}

/*
 * Sampled mode: user space forgets the sampled blocks of a process that
 * is gone or exec'd, whose frees no probe will see. They are deleted here,
 * through forget_sampled (BPF_PROG_RUN), so that each deleted block's
 * count in the filter drops as take_sampled's does: a user-space read and
 * write of a filter slot would lose a probe's concurrent add, and then a
 * sampled block's free could be missed. (Deleted from user space, their
 * counts stayed: a long whole-host run slowly lost the filter's benefit.)
 * User space writes a batch into forget_batches, then runs the program.
 */
#define FORGET_BATCH 512

struct forget_batch {
	__u32 pid;
	__u32 n;       /* addrs used */
	__u32 deleted; /* out: blocks that were there */
	__u32 pad;
	__u64 addrs[FORGET_BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct forget_batch);
} forget_batches SEC(".maps");

static long forget_one(__u64 i, void *unused)
{
	__u32 zero = 0, *hint;
	struct forget_batch *b = bpf_map_lookup_elem(&forget_batches, &zero);
	struct sample_key k = {};

	if (!b || i >= FORGET_BATCH || i >= b->n)
		return 1;
	k.addr = b->addrs[i];
	k.pid = b->pid;
	hint = sampled_hint_slot(&k);
	if (bpf_map_delete_elem(&sampled, &k))
		return 0;
	if (hint)
		__sync_fetch_and_add(hint, -1);
	b->deleted++;
	return 0;
}

SEC("syscall")
int forget_sampled(void *ctx)
{
	bpf_loop(FORGET_BATCH, forget_one, 0, 0);
	return 0;
}

/* count_alloc adds a successful allocation to its process's exact counts. */
static __always_inline void count_alloc(struct inflight *s, __u64 size)
{
	__u32 pid = s->cur_id >> 32;
	struct alloc_counts *c, zero = {};

	c = bpf_map_lookup_elem(&proc_counts, &pid);
	if (!c) {
		bpf_map_update_elem(&proc_counts, &pid, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&proc_counts, &pid);
		if (!c) {
			count_lost(pid); /* the map is full: this process's counts are short */
			return;
		}
	}
	c->allocs += 1;
	c->alloc_bytes += size;
}

/*
 * wanted reports whether the current task's calls are traced: never
 * memtrace's own, and with --comm or --cgroup only those of the processes
 * they select. Without them (-p and --, whose probes carry a PID filter)
 * the loader leaves the checks out of the programs.
 */
static __always_inline int wanted_task(struct task_struct *t)
{
	if (self_pid && (__u32)t->tgid == self_pid)
		return 0;
	if (filter_cgroup && bpf_current_task_under_cgroup(&cgroup_filter, 0) != 1)
		return 0;
	if (filter_comm) {
		struct task_struct *leader = BPF_CORE_READ(t, group_leader);
		__u64 c[2] = {};

		bpf_core_read(c, sizeof(c), &leader->comm);
		if (c[0] != comm_filter[0] || c[1] != comm_filter[1])
			return 0;
	}
	return 1;
}

static __always_inline int wanted(void)
{
	return wanted_task(bpf_get_current_task_btf());
}

/*
 * wake_flags wakes the reader only as the pending data crosses wakeup_bytes.
 * Waking on every event above it cost more than the trap itself (measured:
 * 3x the run time of a malloc/free loop); the reader also polls, so a
 * crossing missed in a race only delays it by one poll.
 */
static __always_inline __u64 wake_flags(void)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	if (avail >= wakeup_bytes && avail < wakeup_bytes + WAKEUP_WINDOW)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/*
 * What emit writes, besides pid and tid: the fields of struct event a probe
 * knows. Callers pass a compound literal, so unnamed fields are 0; inlined,
 * it compiles to the same stores as positional arguments.
 */
struct emit_args {
	__u64 addr, size, old_addr, old_size;
	__u64 call_site, leaf;
	__u64 id;  /* bpf_get_current_pid_tgid() when the caller has it; 0: emit reads it */
	__u8 kind, func, flags;
	__u8 wake; /* wake the reader at once */
};

/* reserve reserves size bytes of the ring, or counts the event lost (NULL). */
static __always_inline void *reserve(__u64 size, __u64 id)
{
	void *p = bpf_ringbuf_reserve(&events, size, 0);

	if (!p)
		count_lost(id >> 32);
	return p;
}

/*
 * emit writes a record without a stack: frees, unmappings, and allocations
 * when no stack is kept; a free_event, site_event or small_event when it holds all of
 * it (the branches are mostly decided at compile time: emit is inlined
 * with constant arguments).
 */
static __always_inline void emit(const struct emit_args *a)
{
	__u64 id = a->id ? a->id : bpf_get_current_pid_tgid();
	__u64 flags = a->wake ? BPF_RB_FORCE_WAKEUP : wake_flags();
	int tags = a->addr < (1ULL << TAG_ADDR_BITS);
	struct small_event *se;
	struct site_event *ie;
	struct free_event *fe;
	struct event *e;

	if (tags && !a->size && !a->call_site && !a->leaf && !a->old_addr && !a->old_size && !a->flags) {
		fe = reserve(sizeof(*fe), id);
		if (!fe)
			return;
		fe->tagged = tag_addr(a->addr, a->kind, a->func);
		fe->pid = id >> 32;
		fe->tid = (__u32)id;
		bpf_ringbuf_submit(fe, flags);
	} else if (tags && a->call_site == a->leaf && a->size <= 0xffffffffULL && !a->old_addr && !a->old_size) {
		ie = reserve(sizeof(*ie), id);
		if (!ie)
			return;
		ie->tagged = tag_addr(a->addr, a->kind, a->func);
		ie->call_site = a->call_site;
		ie->size = (__u32)a->size;
		ie->pid = id >> 32;
		ie->tid = (__u32)id;
		ie->flags = a->flags;
		bpf_ringbuf_submit(ie, flags);
	} else if (!a->old_addr && !a->old_size) {
		se = reserve(sizeof(*se), id);
		if (!se)
			return;
		se->addr = a->addr;
		se->size = a->size;
		se->call_site = a->call_site;
		se->leaf = a->leaf;
		se->pid = id >> 32;
		se->tid = (__u32)id;
		se->kind = a->kind;
		se->func = a->func;
		se->flags = a->flags;
		bpf_ringbuf_submit(se, flags);
	} else {
		e = reserve(sizeof(*e), id);
		if (!e)
			return;
		/* No timestamp: it cost ~24 ns per event; the reader stamps each batch. */
		e->time = 0;
		e->addr = a->addr;
		e->size = a->size;
		e->old_addr = a->old_addr;
		e->old_size = a->old_size;
		e->call_site = a->call_site;
		e->leaf = a->leaf;
		e->pid = id >> 32;
		e->tid = (__u32)id;
		e->kind = a->kind;
		e->func = a->func;
		e->flags = a->flags;
		e->charged = 0;
		e->stack_id = -1;
		bpf_ringbuf_submit(e, flags);
	}
}

#include "frames.h"
#include "refault.h"
#include "unwind.h"
#include "resident.h"

/*
 * jvm_category is the JVM category of the call s ends, 0 for none: the
 * category os::malloc or os::realloc last asked for on this thread, if this
 * call returns into that function's code (so a category whose os::malloc
 * made no call never reaches another block). For other processes it costs
 * one branch.
 */
static __always_inline __u8 jvm_category(struct pt_regs *ctx, struct inflight *s)
{
	if (!s->jvm_cat || PT_REGS_IP(ctx) - s->jvm_pc >= s->jvm_len)
		return 0;
	return s->jvm_cat;
}

/*
 * memo_holds reports whether the thread's memo (struct inflight) is of its
 * allocator caller at pc, in the frame cache's current epoch and the
 * process's address space: then that caller's charged frame is known
 * without the frame cache's lookups (most allocations come from a loop).
 */
static __always_inline int memo_holds(struct inflight *s, __u64 pc)
{
	__u64 epoch;

	if (stack_depth || s->memo_pc != pc || py_process(s->cur_id >> 32))
		return 0;
	epoch = frames_epoch();
	return epoch && s->memo_epoch == epoch && s->memo_mm == s->cur_mm;
}

/*
 * report_wrapped reports an allocation (no old block) whose caller is a
 * remembered wrapper (operator new) with an sp-based CFA, called again from
 * the same call site: one read of its return address tells; 0 when it is
 * not. A global function: its locals stay off the return program's stack,
 * which 6.1's verifier counts with the walk's.
 */
__noinline int report_wrapped(struct pt_regs *ctx, struct inflight *s, __u64 addr, __u64 size)
{
	__u64 pc, site;

	if (!ctx || !s || !s->memo_off)
		return 0;
	pc = PT_REGS_IP(ctx);
	if (!memo_holds(s, pc) ||
	    bpf_probe_read_user(&site, sizeof(site), (void *)(PT_REGS_SP(ctx) + s->memo_off - 8)) ||
	    site != s->memo_site)
		return 0;
	emit(&(struct emit_args){.kind = KIND_ALLOC, .func = s->func, .addr = addr, .size = size, .call_site = site,
				 .leaf = pc, .flags = jvm_category(ctx, s) << EVENT_CAT_SHIFT, .id = s->cur_id});
	return 1;
}

/*
 * remember_site remembers what emit_site found of pc's charged frame
 * (known: 1, charged itself; 2, a wrapper whose caller is, from the walk's
 * state in scratch) for memo_holds. The epoch is read again, not kept
 * from before emit_site: kept, it took the return program's stack past
 * 6.1's limit; the address space and ids are the thread state's.
 */
static __always_inline void remember_site(struct inflight *s, __u64 pc, int known)
{
	__u64 epoch, mm;
	struct stack_record *rec;
	__u32 zero = 0;

	s->memo_pc = 0;
	if (!known || stack_depth)
		return;
	epoch = frames_epoch();
	mm = s->cur_mm;
	if (!epoch)
		return;
	s->memo_off = 0;
	if (known == 2) {
		/*
		 * The per-CPU scratch: another walk may have reused it if this
		 * program was preempted, so it must be a walk of this process
		 * from this pc in this epoch. (Another thread's from the same pc
		 * has the same offset; its caller is checked against this
		 * thread's stack at each use.)
		 */
		rec = bpf_map_lookup_elem(&scratch, &zero);
		if (!rec || rec->w.leaf != pc || rec->w.pid != (__u32)(s->cur_id >> 32) ||
		    rec->w.epoch != epoch || rec->w.mm != mm || !rec->w.memo || rec->w.leaf_off <= 0)
			return;
		s->memo_off = rec->w.leaf_off;
		s->memo_site = rec->w.charged_pc;
	}
	s->memo_pc = pc;
	s->memo_epoch = epoch;
	s->memo_mm = mm;
}

/*
 * report_site reports the allocation s made with its charged call site
 * (emit_site), or, for an allocation from a remembered caller, without the
 * frame cache: a caller charged itself here, a wrapper (report_wrapped).
 */
static __always_inline void report_site(struct pt_regs *ctx, struct inflight *s, __u8 kind,
					__u64 addr, __u64 size, __u64 old_addr, __u64 old_size)
{
	struct site_args a = {.addr = addr, .size = size, .old_addr = old_addr, .old_size = old_size,
			      .pc = PT_REGS_IP(ctx), .sp = PT_REGS_SP(ctx), .bp = PT_REGS_FP(ctx),
			      .kind = kind, .func = s->func, .cat = jvm_category(ctx, s)};
	__u64 pc = PT_REGS_IP(ctx);

	if (kind == KIND_ALLOC && !s->memo_off && memo_holds(s, pc)) {
		emit(&(struct emit_args){.kind = KIND_ALLOC, .func = s->func, .addr = addr, .size = size,
					 .call_site = pc, .leaf = pc, .flags = a.cat << EVENT_CAT_SHIFT, .id = s->cur_id});
		return;
	}
	if (kind == KIND_ALLOC && report_wrapped(ctx, s, addr, size))
		return;
	remember_site(s, pc, emit_site(&a));
}

/* in_outer's answers. */
enum { OUTER_NO = 0, OUTER_YES = 1, OUTER_MAYBE = 2 };

/*
 * in_outer reports whether a call of fn entered at sp is inside the
 * thread's recorded outer call. A call whose return probe runs is in
 * flight until its return clears its state, so any call at or below its
 * entry sp is inside it (nested, or tail-called). A call whose return a
 * session skipped (noret) leaves its state behind, and nothing at entry
 * tells cheaply whether it still runs: reading its return address to
 * compare later cost ~160 ns, half of the session program (measured,
 * kernel 6.18). So a later call at or above its sp is past it; below it,
 * only an anonymous mmap can be the allocator's own work (glibc's,
 * jemalloc's, tcmalloc's and mimalloc's malloc family call no other
 * allocation function through its public entry), and whether it was is
 * decided at the mmap's return by the stack walk (OUTER_MAYBE,
 * outer_frame). Another allocation call below it starts a new outer call;
 * free and munmap there are not nested and keep the state (glibc unmaps
 * parts of a new heap it just mapped), and an mremap there is the
 * program's (no allocator's malloc family calls it).
 */
static __always_inline int in_outer(struct inflight *s, __u64 sp, __u64 fn)
{
	if (!s->sp)
		return OUTER_NO;
	if (!s->noret)
		return s->sp >= sp ? OUTER_YES : OUTER_NO;
	if (sp < s->sp) {
		if (fn == FUNC_MMAP)
			return OUTER_MAYBE;
		if (fn == FUNC_FREE || fn == FUNC_MUNMAP || fn == FUNC_MREMAP)
			return OUTER_NO;
	}
	s->sp = 0;
	return OUTER_NO;
}

/* resume_skipped makes the skipped call below which an mmap ran (outer_sp) the thread's call again. */
static __always_inline void resume_skipped(struct inflight *s)
{
	s->sp = s->outer_sp;
	s->noret = 1;
	s->outer_sp = 0;
}

/*
 * outer_past decides, at the return of an anonymous mmap entered below a
 * noret call (s->outer_sp), whether that call was over: 1 when it was (the
 * mmap is the program's own and is reported; the noret state is gone), 0
 * when the mmap was made inside it (the allocator's, holding the block it
 * returns, which sampling accounts for: not reported, and the noret state
 * comes back for the rest of that call), and 0 too when the walk cannot
 * tell (no unwind table yet, a broken stack): then the mmap is counted
 * lost, so that the report says its figures may be short.
 */
static __always_inline int outer_past(struct pt_regs *ctx, struct inflight *s)
{
	int r = outer_frame(ctx, s);

	if (r == OUTER_FRAME_OTHER) {
		s->outer_sp = 0;
		return 1;
	}
	if (r == OUTER_FRAME_UNKNOWN)
		count_lost(bpf_get_current_pid_tgid() >> 32);
	resume_skipped(s);
	return 0;
}

/*
 * enter records the outermost allocator call of this thread and returns
 * 1, or 0 for a call inside another (in_outer): it belongs to the outer
 * call and is not recorded: glibc's realloc calls mremap, aligned_alloc
 * calls memalign, malloc calls mmap, and so on. State whose frame is
 * already gone is stale and replaced. Who is charged is decided at the
 * return (unwind.h's walk).
 */
static __always_inline int enter(struct pt_regs *ctx, struct task_struct *t, __u8 func, __u64 size,
				 __u64 old_addr, __u64 old_size)
{
	struct inflight *s;
	__u64 sp = PT_REGS_SP(ctx), outer = 0;
	int in;

	s = thread_state(t, 1);
	if (!s)
		return 0;
	in = in_outer(s, sp, func);
	if (in == OUTER_YES) {
		if (fault_sample_bytes && func == FUNC_MREMAP) {
			/* Not the program's: only where its pages go (nested_moved). */
			s->nested_sp = sp;
			s->nested_old_addr = old_addr;
			s->nested_old_size = old_size;
		}
		return 0;
	}
	if (in == OUTER_MAYBE)
		outer = s->sp;
	s->nested_sp = 0;
	s->outer_sp = outer;
	s->sp = sp;
	s->size = size;
	s->old_addr = old_addr;
	s->old_size = old_size;
	s->func = func;
	s->noret = 0;
	s->presampled = 0;
	return 1;
}

/*
 * nested reports whether an entry-only probe (free, munmap) of the thread
 * id fires inside an outer call. Most fire with no call in flight: the
 * slot of their thread id then holds none (sp 0, whichever thread it
 * belongs to), which one inlined lookup tells without the checks of
 * thread_state (the task's start time and address space: ~25 ns of a free,
 * measured).
 */
static __always_inline int nested(struct pt_regs *ctx, struct task_struct *t, __u64 fn, __u64 id)
{
	__u32 tid = (__u32)id;
	struct thread_slot *slot = bpf_map_lookup_elem(&thread_slots, &tid);
	struct inflight *s;

	if (slot && !slot->s.sp)
		return 0;
	s = thread_state(t, 0);
	return s && in_outer(s, PT_REGS_SP(ctx), fn) == OUTER_YES;
}

/*
 * emit_moved writes a KIND_MOVED record. A global function: the record's
 * arguments stay off the return program's stack, which 6.1's verifier
 * counts with the walk's.
 */
__noinline int emit_moved(__u64 addr, __u64 old_addr, __u64 old_size)
{
	emit(&(struct emit_args){.kind = KIND_MOVED, .func = FUNC_MREMAP, .addr = addr, .old_addr = old_addr,
				 .old_size = old_size});
	return 0;
}

/*
 * nested_moved tells, at the return of an mremap made inside an allocator
 * call (enter), where it moved the pages: resident pages move with their
 * mapping, and stay charged to who made them resident.
 */
static __always_inline void nested_moved(struct pt_regs *ctx, struct inflight *s)
{
	__u64 ret = PT_REGS_RC(ctx);

	if (PT_REGS_SP(ctx) != s->nested_sp + 8)
		return;
	s->nested_sp = 0;
	if (ret != MAP_FAILED && ret != s->nested_old_addr)
		emit_moved(ret, s->nested_old_addr, s->nested_old_size);
}

/*
 * leave returns the in-flight call that this return ends, or NULL when the
 * return belongs to a nested call, or to a call that recorded none (dlopen):
 * after `ret`, sp is the entry sp + 8. A call whose return was skipped
 * (noret) is never ended here: a dlopen at its depth returns at its sp + 8.
 */
static __always_inline struct inflight *leave(struct pt_regs *ctx)
{
	struct inflight *s;

	s = thread_state(bpf_get_current_task_btf(), 0);
	if (!s || !s->sp || s->noret || PT_REGS_SP(ctx) != s->sp + 8) {
		if (fault_sample_bytes && s && s->nested_sp &&
		    (bpf_get_attach_cookie(ctx) & FUNC_COOKIE_MASK) == FUNC_MREMAP)
			nested_moved(ctx, s);
		return 0;
	}
	s->sp = 0;
	return s;
}

/*
 * emit_code_map reports a library dlopen just loaded, from the struct
 * link_map it returned (l_addr, the load bias, and l_name, its path: the
 * public, stable head of glibc's link_map). With path and bias the library's
 * call sites resolve even after dlclose, whenever the reader gets to them.
 */
static __always_inline void emit_code_map(__u64 map)
{
	__u64 id = bpf_get_current_pid_tgid(), head[2] = {};
	struct code_event *e;

	if (bpf_probe_read_user(head, sizeof(head), (void *)map))
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(id >> 32);
		return;
	}
	__builtin_memset(e, 0, sizeof(e->e));
	e->e.time = bpf_ktime_get_ns();
	e->e.addr = head[0];
	e->e.pid = id >> 32;
	e->e.tid = (__u32)id;
	e->e.kind = KIND_CODE_MAP;
	e->e.func = FUNC_DLOPEN;
	e->e.stack_id = -1;
	if (bpf_probe_read_user_str(e->path, sizeof(e->path), (void *)head[1]) < 0)
		e->path[0] = 0;
	/* dlopen is rare: wake the reader, so that a JVM's probes go in soon (session/jvm.go). */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/*
 * emit_mark reports a call of the i-th --mark function. Its first argument
 * is read as a C string, the mark's label; when it is none the reader
 * labels the mark with the function's name. A string on a page not yet
 * touched cannot be read here (no faults): addr carries the argument so
 * that the reader can read it from the process. No timestamp, as for
 * allocations: the reader stamps the batch, so marks and events share one
 * clock and one order.
 */
static __always_inline void emit_mark(__u64 i, __u64 arg)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct code_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(id >> 32);
		return;
	}
	__builtin_memset(e, 0, sizeof(e->e));
	e->e.addr = arg;
	e->e.size = i;
	e->e.pid = id >> 32;
	e->e.tid = (__u32)id;
	e->e.kind = KIND_MARK;
	e->e.func = FUNC_MARK;
	e->e.stack_id = -1;
	if (!arg || bpf_probe_read_user_str(e->path, sizeof(e->path), (void *)arg) < 0)
		e->path[0] = 0;
	bpf_ringbuf_submit(e, wake_flags());
}

/*
 * alloc_done reports a successful allocation of s->size bytes at addr:
 * always when exact; sampled, it counts it exactly and reports it only
 * when it is sampled.
 */
static __always_inline void alloc_done(struct pt_regs *ctx, struct inflight *s, __u64 addr)
{
	if (sample_bytes && s->presampled) {
		remember_sampled(addr, s->cur_id >> 32); /* counted and sampled at entry (session) */
	} else if (sample_bytes) {
		count_alloc(s, s->size);
		if (!sampled_block(s, addr, s->size))
			return;
	}
	report_site(ctx, s, KIND_ALLOC, addr, s->size, 0, 0);
}

/*
 * realloc_sampled: a realloc that succeeded (ret != 0) or released its
 * block (realloc(p, 0) = NULL) is, sampled, a free of the old block (seen
 * only if it was sampled) and an allocation of the new one (counted, and
 * seen if sampled). What is seen goes out as one realloc record, whose
 * old_addr is 0 when the old block was not sampled; a release alone is a
 * free record.
 */
static __always_inline void realloc_sampled(struct pt_regs *ctx, struct inflight *s, __u64 ret)
{
	__u64 old = s->old_addr && take_sampled(s->old_addr, s->cur_id >> 32) ? s->old_addr : 0;
	int seen = 0;

	if (ret) {
		count_alloc(s, s->size);
		seen = sampled_block(s, ret, s->size);
	}
	if (seen)
		report_site(ctx, s, KIND_REALLOC, ret, s->size, old, 0);
	else if (old)
		emit(&(struct emit_args){.kind = KIND_FREE, .func = s->func, .addr = old});
}

/* fill_proc fills a whole-host process event with the process's comm. */
static __always_inline void fill_proc(struct proc_event *e, __u64 id, __u8 kind, __u64 wanted)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_struct *leader = BPF_CORE_READ(t, group_leader);

	e->e.time = bpf_ktime_get_ns();
	e->e.size = wanted;
	e->e.pid = id >> 32;
	e->e.tid = (__u32)id;
	e->e.kind = kind;
	e->e.stack_id = -1;
	bpf_core_read(e->comm, sizeof(e->comm), &leader->comm);
}

/* emit_proc writes a whole-host process event with the process's comm. */
static __always_inline void emit_proc(__u8 kind, __u64 wanted, __u64 flags)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct proc_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(id >> 32);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_proc(e, id, kind, wanted);
	bpf_ringbuf_submit(e, flags);
}

/*
 * enter_call records the entry of an allocating call, reading its
 * function's arguments (enter); 1 when recorded.
 */
static __always_inline int enter_call(struct pt_regs *ctx, struct task_struct *t, __u64 fn)
{
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);

	switch (fn & FUNC_BASE_MASK) {
	case FUNC_MALLOC:
	case FUNC_VALLOC:
	case FUNC_PVALLOC:
		return enter(ctx, t, fn, a1, 0, 0);
	case FUNC_CALLOC:
		/* An overflowing product makes calloc fail, and failures are dropped. */
		return enter(ctx, t, fn, a1 * a2, 0, 0);
	case FUNC_REALLOC:
		return enter(ctx, t, fn, a2, a1, 0);
	case FUNC_REALLOCARRAY:
		return enter(ctx, t, fn, a2 * a3, a1, 0);
	case FUNC_POSIX_MEMALIGN:
		return enter(ctx, t, fn, a3, a1, 0);
	case FUNC_ALIGNED_ALLOC:
	case FUNC_MEMALIGN:
		return enter(ctx, t, fn, a2, 0, 0);
	case FUNC_MMAP:
		/* File mappings are not memory the program allocated. */
		if (PT_REGS_PARM4(ctx) & MAP_ANONYMOUS)
			return enter(ctx, t, fn, a2, 0, 0);
		if (a3 & PROT_EXEC)
			frames_invalidate(); /* code may come where cached code was */
		return 0;
	case FUNC_MREMAP:
		return enter(ctx, t, fn, a3, a1, a2);
	}
	return 0;
}

/*
 * One entry program for every probed function, and one return program: the
 * attach cookie says which function. One program per role lets all of a
 * file's probes share one uprobe_multi link, whose removal waits for one RCU
 * grace period instead of one per probe (~0.1 s each here).
 */
SEC("uprobe.multi")
int entry(struct pt_regs *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 fn = bpf_get_attach_cookie(ctx), id = task_id(t);
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx);

	if (!wanted_task(t))
		return 0;
	if (fn >= FUNC_MARK && !(fn & FUNC_PY)) {
		emit_mark(fn - FUNC_MARK, a1);
		return 0;
	}
	switch (fn & FUNC_BASE_MASK) {
	case FUNC_FREE:
		/*
		 * free(NULL) does nothing; the caller is not needed to account a
		 * free. Sampled: only the free of a sampled block is reported
		 * (looked up first: most are not, and then nothing else is read).
		 */
		if (!a1 || (sample_bytes && !is_sampled(a1, id >> 32)))
			break;
		if (nested(ctx, t, FUNC_FREE, id))
			break;
		if (!sample_bytes || take_sampled(a1, id >> 32))
			emit(&(struct emit_args){.kind = KIND_FREE, .func = fn, .addr = a1, .id = id});
		break;
	case FUNC_MUNMAP:
		frames_unmap(a1);
		if (!nested(ctx, t, FUNC_MUNMAP, id))
			emit(&(struct emit_args){.kind = KIND_MUNMAP, .func = FUNC_MUNMAP, .addr = a1, .size = a2, .id = id});
		break;
	default:
		enter_call(ctx, t, fn);
	}
	return 0;
}

/*
 * jvm_entry: HotSpot's os::malloc and os::realloc in libjvm.so (and
 * os::strdup, into which os::malloc is inlined), entry only (the JVM
 * unwinds through its frames with exceptions and signals: never a return
 * probe). It remembers the NMT category argument (MEMFLAGS) and
 * where the function's code lies; the allocator call that returns into
 * that code carries the category (jvm_category). The attach cookie
 * (enum jvm_cookie) says which argument is the category and how many
 * bytes of code follow the probe.
 */
SEC("uprobe.multi")
int jvm_entry(struct pt_regs *ctx)
{
	__u64 c = bpf_get_attach_cookie(ctx), a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);
	struct task_struct *t;
	struct inflight *s;
	__u8 cat;

	/* Both read first: the verifier refuses a ctx offset chosen at run time. */
	barrier_var(a2);
	barrier_var(a3);
	cat = (c & JVM_COOKIE_ARG_MASK) == 3 ? a3 : a2;
	t = bpf_get_current_task_btf();
	if (!wanted_task(t))
		return 0;
	s = thread_state(t, 1);
	if (!s)
		return 0;
	s->jvm_pc = PT_REGS_IP(ctx);
	s->jvm_len = c >> JVM_COOKIE_LEN_SHIFT;
	s->jvm_cat = cat < EVENT_CAT_MAX - 1 ? cat + 1 : EVENT_CAT_MAX;
	return 0;
}

/* on_return ends a recorded call and reports what it did (ret, session). */
static __always_inline int on_return(struct pt_regs *ctx)
{
	__u64 ret = PT_REGS_RC(ctx), addr;
	struct inflight *s;

	/*
	 * dlopen records no call (enter_call); asked first, so that a call
	 * whose return never ran (it entered while the return links were
	 * being attached) cannot take dlopen's return for its own.
	 */
	if ((bpf_get_attach_cookie(ctx) & FUNC_COOKIE_MASK) == FUNC_DLOPEN) {
		if (ret)
			frames_invalidate(); /* a library may be where a dlclosed one was */
		if (ret && wanted())
			emit_code_map(ret);
		return 0;
	}
	s = leave(ctx);
	if (!s)
		return 0;
	/*
	 * The kernel restores ip to the hijacked return address before calling
	 * return probes, and sp and rbp are the caller's: the walk that finds
	 * the charged call site (and the stack) starts from there.
	 */
	switch (s->func & FUNC_BASE_MASK) {
	case FUNC_REALLOC:
	case FUNC_REALLOCARRAY:
		/* NULL is a failure (p stays live) unless it released p: realloc(p, 0). */
		if (!ret && !(s->size == 0 && s->old_addr))
			return 0;
		if (sample_bytes) {
			realloc_sampled(ctx, s, ret);
			return 0;
		}
		report_site(ctx, s, KIND_REALLOC, ret, s->size, s->old_addr, 0);
		return 0;
	case FUNC_POSIX_MEMALIGN:
		/* Returns 0 on success and stores the block through its first argument. */
		if ((int)ret != 0)
			return 0;
		addr = 0;
		bpf_probe_read_user(&addr, sizeof(addr), (void *)s->old_addr);
		if (addr)
			alloc_done(ctx, s, addr);
		return 0;
	case FUNC_MMAP:
		if (ret == MAP_FAILED) {
			/* Nothing to tell apart: the skipped call, if any, goes on. */
			if (s->outer_sp)
				resume_skipped(s);
			return 0;
		}
		if (s->outer_sp && !outer_past(ctx, s))
			return 0;
		report_site(ctx, s, KIND_MMAP, ret, s->size, 0, 0);
		return 0;
	case FUNC_MREMAP:
		if (ret != MAP_FAILED)
			report_site(ctx, s, KIND_MREMAP, ret, s->size, s->old_addr, s->old_size);
		return 0;
	default:
		if (ret)
			alloc_done(ctx, s, ret);
		return 0;
	}
}

SEC("uretprobe.multi")
int ret(struct pt_regs *ctx)
{
	return on_return(ctx);
}

extern _Bool bpf_session_is_return(void) __ksym __weak;

/*
 * skippable_size gives the size asked by a call whose return a session
 * may skip: malloc and calloc, which only return a block (NULL on
 * failure) and run their own code while they work (in_outer tells an mmap
 * of theirs by their code). 0 for the others, whose return always runs:
 * realloc, posix_memalign, mmap, mremap, dlopen, and the rare aligned ones
 * (glibc's memalign, aligned_alloc, valloc and pvalloc tail-call an
 * unnamed helper, which may tail-call malloc at the same sp).
 */
static __always_inline int skippable_size(struct pt_regs *ctx, __u64 fn, __u64 *size)
{
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx);

	/*
	 * pymalloc's functions call malloc for large blocks: a skipped
	 * return would leave that malloc a call of its own, counted twice
	 * (in_outer). Their returns always run.
	 */
	if (fn & FUNC_PY)
		return 0;
	switch (fn & FUNC_BASE_MASK) {
	case FUNC_MALLOC:
		*size = a1;
		return 1;
	case FUNC_CALLOC:
		/*
		 * Kept opaque: otherwise clang turns session_enter's overflow
		 * check into a 128-bit multiply (__multi3), which BPF lacks.
		 */
		a1 *= a2;
		barrier_var(a1);
		*size = a1;
		return 1;
	}
	return 0;
}

/*
 * session_enter is sampled mode's entry of a skippable call: it counts the
 * call (exactly, failures included: whether it fails is not known yet),
 * draws whether it is sampled, and returns 1 to skip the return unless it
 * is. The call stays recorded (noret, with its function's code from the
 * probe on: code_len, from the attach cookie) so that an mmap it makes is
 * not counted again (in_outer, outer_frame). The session cookie is not
 * needed: a return runs only for a call recorded here, in the thread's
 * state where the calls nested in it look.
 */
static __always_inline int session_enter(struct pt_regs *ctx, struct task_struct *t, __u64 fn, __u64 size,
					 __u64 code_len)
{
	struct inflight *s;
	__u64 sp = PT_REGS_SP(ctx), a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx);

	/*
	 * Calls that cannot succeed are not counted, as on the other paths:
	 * a calloc whose product overflows, a size beyond the address space.
	 */
	if (((fn & FUNC_BASE_MASK) == FUNC_CALLOC && a1 && size / a1 != a2) || size >= MAX_USER_SIZE)
		return 1;
	s = thread_state(t, 1);
	if (!s || in_outer(s, sp, fn) == OUTER_YES)
		return 1;
	count_alloc(s, size);
	s->sp = sp;
	s->func = fn;
	if (sample(s, size)) {
		s->size = size;
		s->old_addr = 0;
		s->old_size = 0;
		s->noret = 0;
		s->presampled = 1;
		return 0;
	}
	s->noret = 1;
	s->presampled = 0;
	s->ip = PT_REGS_IP(ctx);
	s->code_end = s->ip + code_len;
	return 1;
}

/*
 * Sampled mode where the kernel has uprobe sessions (Linux 6.13+): one
 * program runs at the entry and the return of the allocating functions,
 * and an entry that returns non-zero has the kernel skip that call's
 * return. A call that is not sampled then takes one trap, not two. Free,
 * munmap and marks stay on the entry program.
 */
SEC("uprobe.session")
int session(struct pt_regs *ctx)
{
	__u64 c = bpf_get_attach_cookie(ctx), fn = c & FUNC_COOKIE_MASK, size;
	struct task_struct *t;

	if (bpf_session_is_return())
		return on_return(ctx);
	if (fn == FUNC_DLOPEN)
		return 0;
	t = bpf_get_current_task_btf();
	if (!wanted_task(t))
		return 1;
	if (skippable_size(ctx, fn, &size))
		return session_enter(ctx, t, fn, size, c >> FUNC_COOKIE_LEN_SHIFT);
	if (enter_call(ctx, t, fn))
		return 0;
	/*
	 * An mremap inside realloc is not recorded, but with resident
	 * attribution its return tells where the pages went (nested_moved):
	 * skipped, glibc's realloc of a block it mapped lost them.
	 */
	return fn == FUNC_MREMAP && fault_sample_bytes ? 0 : 1;
}

/*
 * Whole host: a process executed a new program. Its old statistics are
 * void (the address space is new); user space finds the new program's
 * allocator and probes it if it is a file not probed yet. For a process
 * that passes the filters the reader is woken at once: until then, calls
 * into a file not probed yet go unseen.
 */
SEC("raw_tp/sched_process_exec")
int on_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct linux_binprm *bprm = (struct linux_binprm *)ctx->args[2];
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	struct task_struct *t;
	struct exec_event *e;
	struct inode *ino;
	int w;

	if (self_pid && pid == self_pid)
		return 0;
	if (sample_bytes)
		bpf_map_delete_elem(&proc_counts, &pid);
	w = wanted();
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(pid);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_proc(&e->p, id, KIND_EXEC, w);
	/*
	 * A short-lived process may be gone before user space reads its maps:
	 * the program, for the processes user space symbolizes.
	 */
	if (w) {
		t = bpf_get_current_task_btf();
		e->start_code = BPF_CORE_READ(t, mm, start_code);
		e->end_code = BPF_CORE_READ(t, mm, end_code);
		ino = BPF_CORE_READ(bprm, file, f_inode);
		e->dev = BPF_CORE_READ(ino, i_sb, s_dev);
		e->ino = BPF_CORE_READ(ino, i_ino);
		e->size = BPF_CORE_READ(ino, i_size);
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), BPF_CORE_READ(bprm, interp));
	}
	bpf_ringbuf_submit(e, w ? BPF_RB_FORCE_WAKEUP : wake_flags());
	return 0;
}

/*
 * Whole host: a process's last thread is exiting (group_dead, the
 * tracepoint's second argument). Every event of the process is in the ring
 * before this one, so user space reports its final records when it reads
 * it, then drops it.
 */
SEC("raw_tp/sched_process_exit")
int on_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (exit_has_group_dead) {
		if (!ctx->args[1])
			return 0;
	} else if (BPF_CORE_READ((struct task_struct *)ctx->args[0], signal, live.counter)) {
		/*
		 * Threads left (the counter drops before the tracepoint). Two
		 * threads exiting at once may both see 0: user space ignores a
		 * second exit.
		 */
		return 0;
	}
	if (self_pid && (bpf_get_current_pid_tgid() >> 32) == self_pid)
		return 0;
	emit_proc(KIND_EXIT, 0, wake_flags());
	return 0;
}
