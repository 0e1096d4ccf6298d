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

#include "memtrace.h"

/* The helpers used (probe_read_user, task storage) require a GPL-compatible license. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAP_ANONYMOUS 0x20
#define MAP_FAILED ((__u64)-1)
/* Records (with their 8-byte header) within which a crossing still wakes. */
#define WAKEUP_WINDOW (32 * (sizeof(struct event) + 8))

/* Set by the loader before load. */
/* Wake the reader only when this many bytes wait: a wakeup per event costs more than the trap. */
const volatile __u64 wakeup_bytes = 1 << 20;
/* --detail: take a user stack at the outermost allocator or wrapper entry. */
const volatile __u8 capture_stacks = 0;

/* Keeps the record types in the BTF for bpf2go -type. */
const struct event *unused_event __attribute__((unused));
const struct code_event *unused_code_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

/* User stacks for --detail; the loader sets value_size from --stack-depth. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stacks SEC(".maps");

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

static __always_inline void emit(__u8 kind, __u8 func, __u64 addr, __u64 size,
				 __u64 old_addr, __u64 old_size, __u64 call_site, __s32 stack_id,
				 __u64 wake)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(id >> 32);
		return;
	}
	e->time = bpf_ktime_get_ns();
	e->addr = addr;
	e->size = size;
	e->old_addr = old_addr;
	e->old_size = old_size;
	e->call_site = call_site;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind = kind;
	e->func = func;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	e->stack_id = stack_id;
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : wake_flags());
}

/*
 * enter records the outermost allocator call of this thread. A call made
 * while another is in flight deeper in the stack frame order (sp at or below
 * the outer call's entry sp: nested, or tail-called) belongs to the outer call
 * and is not recorded: glibc's realloc calls mremap, aligned_alloc calls
 * memalign, and so on. State whose frame is already gone (sp above) is stale
 * and replaced. Inside a wrapper (operator new, strdup, …) the call is
 * charged to the wrapper's caller.
 */
static __always_inline void enter(struct pt_regs *ctx, __u8 func, __u64 size,
				  __u64 old_addr, __u64 old_size)
{
	struct inflight *s;
	__u64 sp = PT_REGS_SP(ctx), ret = 0;

	s = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return;
	if (s->sp && s->sp >= sp)
		return;
	if (s->wsp && s->wsp >= sp) {
		s->call_site = s->wsite;
		s->stack_id = s->wstack;
	} else {
		bpf_probe_read_user(&ret, sizeof(ret), (void *)sp);
		s->call_site = ret;
		s->stack_id = capture_stacks ? bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -1;
	}
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
 * Allocation wrappers: only their outermost entry is remembered, so that the
 * allocator calls they make are charged to their caller. Where libstdc++ and
 * libc have no frame pointers, this is what keeps `new` in a user function
 * charged to that function.
 */
static __always_inline void wrapper_enter(struct pt_regs *ctx)
{
	struct inflight *s;
	__u64 sp = PT_REGS_SP(ctx), ret = 0;

	s = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s || (s->wsp && s->wsp >= sp) || (s->sp && s->sp >= sp))
		return;
	bpf_probe_read_user(&ret, sizeof(ret), (void *)sp);
	s->wsp = sp;
	s->wsite = ret;
	s->wstack = capture_stacks ? bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -1;
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
		/* free(NULL) does nothing; the caller is not needed to account a free. */
		if (a1 && !nested(ctx))
			emit(KIND_FREE, FUNC_FREE, a1, 0, 0, 0, 0, -1, 0);
		break;
	case FUNC_MUNMAP:
		if (!nested(ctx))
			emit(KIND_MUNMAP, FUNC_MUNMAP, a1, a2, 0, 0, 0, -1, 0);
		break;
	case FUNC_WRAPPER:
		wrapper_enter(ctx);
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
		if (ret)
			emit_code_map(ret);
		return 0;
	}
	if (bpf_get_attach_cookie(ctx) == FUNC_WRAPPER) {
		s = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, 0);
		if (s && s->wsp && PT_REGS_SP(ctx) == s->wsp + 8)
			s->wsp = 0;
		return 0;
	}
	s = leave(ctx);
	if (!s)
		return 0;
	switch (s->func) {
	case FUNC_REALLOC:
	case FUNC_REALLOCARRAY:
		/* NULL is a failure (p stays live) unless it released p: realloc(p, 0). */
		if (ret || (s->size == 0 && s->old_addr))
			emit(KIND_REALLOC, s->func, ret, s->size, s->old_addr, 0, s->call_site, s->stack_id, 0);
		return 0;
	case FUNC_POSIX_MEMALIGN:
		/* Returns 0 on success and stores the block through its first argument. */
		if ((int)ret != 0)
			return 0;
		addr = 0;
		bpf_probe_read_user(&addr, sizeof(addr), (void *)s->old_addr);
		if (addr)
			emit(KIND_ALLOC, s->func, addr, s->size, 0, 0, s->call_site, s->stack_id, 0);
		return 0;
	case FUNC_MMAP:
		if (ret != MAP_FAILED)
			emit(KIND_MMAP, s->func, ret, s->size, 0, 0, s->call_site, s->stack_id, 0);
		return 0;
	case FUNC_MREMAP:
		if (ret != MAP_FAILED)
			emit(KIND_MREMAP, s->func, ret, s->size, s->old_addr, s->old_size,
			     s->call_site, s->stack_id, 0);
		return 0;
	default:
		if (ret)
			emit(KIND_ALLOC, s->func, ret, s->size, 0, 0, s->call_site, s->stack_id, 0);
		return 0;
	}
}

