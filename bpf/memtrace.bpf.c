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

/* The helpers used (probe_read_user, task storage) require a GPL-compatible license. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAP_ANONYMOUS 0x20
#define MAP_FAILED ((__u64)-1)
/* Records (with their 8-byte header) within which a crossing still wakes. */
#define WAKEUP_WINDOW (32 * (sizeof(struct event) + 8))
/* The exponential draw's table: 2^EXP_BITS buckets of the uniform. */
#define EXP_BITS 12
#define EXP_TABLE_SIZE (1 << EXP_BITS)
#define EXP_FRAC_BITS (32 - EXP_BITS)
/* Redraws past the bottom bucket; each is taken with probability 2^-12. */
#define EXP_MAX_REDRAWS 4
/* Sizes above this are clamped in the countdown (no allocation is that big). */
#define SAMPLE_MAX_SIZE (1ULL << 62)

/* The fields read for --comm and by the exit probe (CO-RE: offsets from the kernel's BTF). */
struct signal_struct {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));

struct task_struct {
	struct task_struct *group_leader;
	struct signal_struct *signal;
	char comm[16];
} __attribute__((preserve_access_index));

/* The fields that name the file a code address is mapped from. */
struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_pgoff;
	struct file *vm_file;
} __attribute__((preserve_access_index));

/* The deepest stack kept, and the frames walked looking for the charged call site. */
#define MAX_STACK 127
#define MAX_WRAPPER_FRAMES 8
/* Binary search steps over a file's rows: tables of up to 2^24 rows. */
#define SEARCH_STEPS 24
/* Offsets in a signal frame's ucontext (uc_mcontext.gregs[REG_RBP], [REG_RSP], [REG_RIP]). */
#define UC_RBP 120
#define UC_RSP 160
#define UC_RIP 168

/* Set by the loader before load. */
/* Wake the reader only when this many bytes wait: a wakeup per event costs more than the trap. */
const volatile __u64 wakeup_bytes = 1 << 20;
/*
 * --detail (and sampled mode): unwind the stack of each reported allocation,
 * keeping at most stack_depth frames from the charged call site on.
 */
const volatile __u32 stack_depth = 0;
/*
 * Sampled mode (--sample-bytes): the mean number of bytes between samples;
 * 0 = exact (every call is an event).
 */
const volatile __u64 sample_bytes = 0;
/*
 * -ln(i/4096) in 16.16 fixed point, i = 0..4096 (entry 0 unused): the
 * inverse CDF of Exp(1) at 4096 points. Set by the loader (tracer/draw.go).
 */
const volatile __u32 exp_table[EXP_TABLE_SIZE + 1] = {};
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
const struct code_event *unused_code_event __attribute__((unused));
const struct proc_event *unused_proc_event __attribute__((unused));
const struct alloc_counts *unused_alloc_counts __attribute__((unused));
const struct sample_key *unused_sample_key __attribute__((unused));
const struct unwind_row *unused_unwind_row __attribute__((unused));
const struct file_key *unused_file_key __attribute__((unused));
const struct unwind_file *unused_unwind_file __attribute__((unused));

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

/* Sampled mode: exact allocation counts per process (user space deletes them at exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
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

/* The draw test (tracer/draw_test.go): one draw, or one sampling decision, per slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 16);
	__type(key, __u32);
	__type(value, __u64);
} draws SEC(".maps");

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

/*
 * exp_draw returns a draw from Exp(1) in 16.16 fixed point, without
 * floating point: the top EXP_BITS bits of a random u32 pick a bucket i of
 * the uniform U, the other bits place U in it, and -ln U is interpolated
 * linearly between the table's -ln(i/4096) and -ln((i+1)/4096). U in the
 * bottom bucket (i = 0, where -ln has no bound) uses memorylessness: given
 * U < 1/4096, -ln U = ln 4096 + X' with X' ~ Exp(1) again, so it adds ln
 * 4096 and draws once more (bounded: 4 redraws in a row happen once in
 * 2^48 draws, and then the sum so far is kept).
 */
static __always_inline __u64 exp_draw(void)
{
	__u64 base = 0, hi, lo;
	__u32 r, i, f;

	for (int k = 0; k < EXP_MAX_REDRAWS; k++) {
		r = bpf_get_prandom_u32();
		i = r >> EXP_FRAC_BITS;
		f = r & ((1U << EXP_FRAC_BITS) - 1);
		if (i == 0) {
			base += exp_table[1]; /* ln 4096 */
			continue;
		}
		hi = exp_table[i];
		lo = exp_table[i + 1];
		return base + hi - (((hi - lo) * f) >> EXP_FRAC_BITS);
	}
	return base;
}

/* draw_bytes returns a draw from Exp(mean sample_bytes), in bytes. */
static __always_inline __s64 draw_bytes(void)
{
	return (__s64)((exp_draw() * sample_bytes) >> 16);
}

/*
 * sample decides whether an allocation of size bytes is sampled: the
 * thread's countdown of bytes to the next sample point drops by size, and
 * the allocation is sampled when a point falls inside it, which happens
 * with probability 1 - e^(-size/sample_bytes) independently of every other
 * allocation. Then the distance from its end to the next point is a fresh
 * draw (the exponential has no memory). Size 0 counts as 1 byte, so that
 * zero-size blocks are sampled (and weighed) too; user space weighs with
 * the same rule.
 */
static __always_inline int sample(struct inflight *s, __u64 size)
{
	__s64 n = size == 0 ? 1 : size > SAMPLE_MAX_SIZE ? SAMPLE_MAX_SIZE : size;

	if (!s->drawn) {
		s->countdown = draw_bytes();
		s->drawn = 1;
	}
	s->countdown -= n;
	if (s->countdown > 0)
		return 0;
	s->countdown = draw_bytes();
	return 1;
}

/*
 * sampled_block decides an allocation at addr and, when sampled, remembers
 * it so that its free is reported. A block that cannot be remembered (the
 * map is full) is still reported, and its future free counts as lost.
 */
static __always_inline int sampled_block(struct inflight *s, __u64 addr, __u64 size)
{
	struct sample_key k = {.addr = addr, .pid = bpf_get_current_pid_tgid() >> 32};
	__u8 one = 1;

	if (!sample(s, size))
		return 0;
	if (bpf_map_update_elem(&sampled, &k, &one, BPF_ANY))
		count_lost(k.pid);
	return 1;
}

/* take_sampled reports whether addr was a sampled block, and forgets it. */
static __always_inline int take_sampled(__u64 addr)
{
	struct sample_key k = {.addr = addr, .pid = bpf_get_current_pid_tgid() >> 32};

	return bpf_map_delete_elem(&sampled, &k) == 0;
}

/* count_alloc adds a successful allocation to its process's exact counts. */
static __always_inline void count_alloc(__u64 size)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
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
	__sync_fetch_and_add(&c->allocs, 1);
	__sync_fetch_and_add(&c->alloc_bytes, size);
}

/*
 * wanted reports whether the current task's calls are traced: never
 * memtrace's own, and with --comm or --cgroup only those of the processes
 * they select. Without them (-p and --, whose probes carry a PID filter)
 * the loader leaves the checks out of the programs.
 */
static __always_inline int wanted(void)
{
	if (self_pid && (bpf_get_current_pid_tgid() >> 32) == self_pid)
		return 0;
	if (filter_cgroup && bpf_current_task_under_cgroup(&cgroup_filter, 0) != 1)
		return 0;
	if (filter_comm) {
		struct task_struct *t = bpf_get_current_task_btf();
		struct task_struct *leader = BPF_CORE_READ(t, group_leader);
		__u64 c[2] = {};

		bpf_core_read(c, sizeof(c), &leader->comm);
		if (c[0] != comm_filter[0] || c[1] != comm_filter[1])
			return 0;
	}
	return 1;
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

/* emit writes a record without a stack: frees, unmappings, and allocations when no stack is kept. */
static __always_inline void emit(__u8 kind, __u8 func, __u64 addr, __u64 size,
				 __u64 old_addr, __u64 old_size, __u64 call_site, __u64 leaf,
				 __u64 wake)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(id >> 32);
		return;
	}
	/* No timestamp: it cost ~24 ns per event; the reader stamps each batch. */
	e->time = 0;
	e->addr = addr;
	e->size = size;
	e->old_addr = old_addr;
	e->old_size = old_size;
	e->call_site = call_site;
	e->leaf = leaf;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind = kind;
	e->func = func;
	e->flags = 0;
	e->pad = 0;
	e->stack_id = -1;
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : wake_flags());
}

#include "unwind.h"
#include "resident.h"

/* report_site reports an allocation with its charged call site (emit_site). */
static __always_inline void report_site(struct pt_regs *ctx, __u8 kind, __u8 func, __u64 addr,
					__u64 size, __u64 old_addr, __u64 old_size)
{
	struct site_args a = {.addr = addr, .size = size, .old_addr = old_addr, .old_size = old_size,
			      .pc = PT_REGS_IP(ctx), .sp = PT_REGS_SP(ctx), .bp = PT_REGS_FP(ctx),
			      .kind = kind, .func = func};

	emit_site(&a);
}

/*
 * enter records the outermost allocator call of this thread. A call made
 * while another is in flight deeper in the stack frame order (sp at or below
 * the outer call's entry sp: nested, or tail-called) belongs to the outer call
 * and is not recorded: glibc's realloc calls mremap, aligned_alloc calls
 * memalign, and so on. State whose frame is already gone (sp above) is stale
 * and replaced. Who is charged is decided at the return (unwind.h's walk).
 */
static __always_inline void enter(struct pt_regs *ctx, __u8 func, __u64 size,
				  __u64 old_addr, __u64 old_size)
{
	struct inflight *s;
	__u64 sp = PT_REGS_SP(ctx);

	s = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return;
	if (s->sp && s->sp >= sp)
		return;
	s->sp = sp;
	s->size = size;
	s->old_addr = old_addr;
	s->old_size = old_size;
	s->func = func;
}

/* nested reports whether an entry-only probe (free, munmap) fires inside an outer call. */
static __always_inline int nested(struct pt_regs *ctx)
{
	struct inflight *s;

	s = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, 0);
	return s && s->sp && s->sp >= PT_REGS_SP(ctx);
}

/*
 * leave returns the in-flight call that this return ends, or NULL when the
 * return belongs to a nested call. After `ret`, sp is the entry sp + 8.
 */
static __always_inline struct inflight *leave(struct pt_regs *ctx)
{
	struct inflight *s;

	s = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, 0);
	if (!s || !s->sp || PT_REGS_SP(ctx) != s->sp + 8)
		return 0;
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
	bpf_ringbuf_submit(e, wake_flags());
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
	if (sample_bytes) {
		count_alloc(s->size);
		if (!sampled_block(s, addr, s->size))
			return;
	}
	report_site(ctx, KIND_ALLOC, s->func, addr, s->size, 0, 0);
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
	__u64 old = s->old_addr && take_sampled(s->old_addr) ? s->old_addr : 0;
	int seen = 0;

	if (ret) {
		count_alloc(s->size);
		seen = sampled_block(s, ret, s->size);
	}
	if (seen)
		report_site(ctx, KIND_REALLOC, s->func, ret, s->size, old, 0);
	else if (old)
		emit(KIND_FREE, s->func, old, 0, 0, 0, 0, 0, 0);
}

/* emit_proc writes a whole-host process event with the process's comm. */
static __always_inline void emit_proc(__u8 kind, __u64 wanted, __u64 flags)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *t = bpf_get_current_task_btf();
	struct task_struct *leader = BPF_CORE_READ(t, group_leader);
	struct proc_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(id >> 32);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->e.time = bpf_ktime_get_ns();
	e->e.size = wanted;
	e->e.pid = id >> 32;
	e->e.tid = (__u32)id;
	e->e.kind = kind;
	e->e.stack_id = -1;
	bpf_core_read(e->comm, sizeof(e->comm), &leader->comm);
	bpf_ringbuf_submit(e, flags);
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
	__u64 fn = bpf_get_attach_cookie(ctx);
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);

	if (!wanted())
		return 0;
	if (fn >= FUNC_MARK) {
		emit_mark(fn - FUNC_MARK, a1);
		return 0;
	}
	switch (fn) {
	case FUNC_MALLOC:
	case FUNC_VALLOC:
	case FUNC_PVALLOC:
		enter(ctx, fn, a1, 0, 0);
		break;
	case FUNC_CALLOC:
		/* An overflowing product makes calloc fail, and failures are dropped. */
		enter(ctx, fn, a1 * a2, 0, 0);
		break;
	case FUNC_REALLOC:
		enter(ctx, fn, a2, a1, 0);
		break;
	case FUNC_REALLOCARRAY:
		enter(ctx, fn, a2 * a3, a1, 0);
		break;
	case FUNC_POSIX_MEMALIGN:
		enter(ctx, fn, a3, a1, 0);
		break;
	case FUNC_ALIGNED_ALLOC:
	case FUNC_MEMALIGN:
		enter(ctx, fn, a2, 0, 0);
		break;
	case FUNC_MMAP:
		/* File mappings are not memory the program allocated. */
		if (PT_REGS_PARM4(ctx) & MAP_ANONYMOUS)
			enter(ctx, fn, a2, 0, 0);
		break;
	case FUNC_MREMAP:
		enter(ctx, fn, a3, a1, a2);
		break;
	case FUNC_FREE:
		/*
		 * free(NULL) does nothing; the caller is not needed to account a
		 * free. Sampled: only the free of a sampled block is reported.
		 */
		if (a1 && !nested(ctx) && (!sample_bytes || take_sampled(a1)))
			emit(KIND_FREE, FUNC_FREE, a1, 0, 0, 0, 0, 0, 0);
		break;
	case FUNC_MUNMAP:
		if (!nested(ctx))
			emit(KIND_MUNMAP, FUNC_MUNMAP, a1, a2, 0, 0, 0, 0, 0);
		break;
	}
	return 0;
}

SEC("uretprobe.multi")
int ret(struct pt_regs *ctx)
{
	__u64 ret = PT_REGS_RC(ctx), addr;
	struct inflight *s;

	if (bpf_get_attach_cookie(ctx) == FUNC_DLOPEN) {
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
	switch (s->func) {
	case FUNC_REALLOC:
	case FUNC_REALLOCARRAY:
		/* NULL is a failure (p stays live) unless it released p: realloc(p, 0). */
		if (!ret && !(s->size == 0 && s->old_addr))
			return 0;
		if (sample_bytes) {
			realloc_sampled(ctx, s, ret);
			return 0;
		}
		report_site(ctx, KIND_REALLOC, s->func, ret, s->size, s->old_addr, 0);
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
		if (ret != MAP_FAILED)
			report_site(ctx, KIND_MMAP, s->func, ret, s->size, 0, 0);
		return 0;
	case FUNC_MREMAP:
		if (ret != MAP_FAILED)
			report_site(ctx, KIND_MREMAP, s->func, ret, s->size, s->old_addr, s->old_size);
		return 0;
	default:
		if (ret)
			alloc_done(ctx, s, ret);
		return 0;
	}
}

/*
 * Whole host: a process executed a new program. Its old statistics are
 * void (the address space is new); user space finds the new program's
 * allocator and probes it if it is a file not probed yet. For a process
 * that passes the filters the reader is woken at once: until then, calls
 * into a file not probed yet go unseen.
 */
SEC("raw_tp/sched_process_exec")
int on_exec(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	int w;

	if (self_pid && pid == self_pid)
		return 0;
	if (sample_bytes)
		bpf_map_delete_elem(&proc_counts, &pid);
	w = wanted();
	emit_proc(KIND_EXEC, w, w ? BPF_RB_FORCE_WAKEUP : wake_flags());
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

/* The draw test: one exp_draw() per slot of draws. */
static long draw_one(__u64 i, void *ctx)
{
	__u32 k = i;
	__u64 *v = bpf_map_lookup_elem(&draws, &k);

	if (v)
		*v = exp_draw();
	return 0;
}

SEC("syscall")
int draw_test(void *ctx)
{
	bpf_loop(1 << 16, draw_one, 0, 0);
	return 0;
}

/*
 * The sampling test: each slot of draws holds an allocation size on input
 * and, on output, 1 if one thread's countdown sampled that allocation.
 */
static long sample_one(__u64 i, void *ctx)
{
	__u32 k = i;
	__u64 *v = bpf_map_lookup_elem(&draws, &k);

	if (v)
		*v = sample(ctx, *v);
	return 0;
}

SEC("syscall")
int sample_test(void *ctx)
{
	struct inflight s = {};

	bpf_loop(1 << 16, sample_one, &s, 0);
	return 0;
}

