/*
 * What every probe shares: the limits of the walk, the settings the loader
 * writes (const volatile), the maps (the ring, the unwind tables, the
 * per-thread in-flight state, lost events, sampled blocks, exact counts,
 * the cgroup filter), and the helpers on them: thread_state, count_lost,
 * the sampled-block filter, count_alloc, wanted, wake_flags, emit.
 * Provides those. Needs: memtrace.h, sample.h, kernel.h (included here).
 * The other headers (frames.h, refault.h, unwind.h, resident.h) build on
 * it; memtrace.bpf.c holds the programs.
 */
#ifndef MEMTRACE_PROBES_H
#define MEMTRACE_PROBES_H

#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "memtrace.h"
#include "sample.h"
#include "kernel.h"

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
 * through mt_forget_smpl (BPF_PROG_RUN), so that each deleted block's
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

#endif
