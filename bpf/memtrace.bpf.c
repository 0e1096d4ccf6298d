//go:build ignore

/*
 * memtrace's BPF programs, one object (tracer/ loads it):
 *  - mt_alloc_entry, mt_alloc_ret: entry and return uprobes on the allocator
 *    functions of each traced process (malloc, calloc, realloc, free, mmap,
 *    munmap, mremap, the allocation wrappers, dlopen, --mark functions),
 *    uprobe_multi links or per-probe ones; mt_alloc_sess replaces both in
 *    sampled mode on Linux 6.13+ (a uprobe session skips unsampled returns);
 *    mt_jvm_entry: HotSpot's os::malloc and os::realloc (categories).
 *  - mt_exec, mt_exit: raw tracepoints of the whole-host mode.
 *  - mt_fault_user, mt_fault_kern, mt_page_alloc, mt_rss_stat: BTF
 *    tracepoints of resident attribution (resident.h).
 *  - mt_file_key, mt_forget_smpl: syscall programs user space runs
 *    (BPF_PROG_RUN): the file key the walk sees for a mapping, and the
 *    sampled blocks to forget.
 * Every allocation, release and anonymous mapping that succeeded, and every
 * sampled fault, is written to one ring buffer (events) as a record whose
 * call site is the first frame outside the allocator and its wrappers
 * (unwind.h walks the stack with tables user space builds). Per-event work
 * is kept small: the trap itself already costs most of a microsecond.
 *
 * Layout: this file holds the programs; the headers, each with one concern,
 * say what they provide and need, and include what they need: memtrace.h
 * (types and constants shared with Go), sample.h (the sampling draw),
 * kernel.h (the kernel's structures read through CO-RE), probes.h (the
 * settings, maps and helpers every probe shares), frames.h (the frame
 * cache), refault.h (refault slots), unwind.h (the stack walk and
 * emit_site), resident.h (resident attribution's logic).
 */
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "memtrace.h"
#include "sample.h"
#include "kernel.h"
#include "probes.h"
#include "frames.h"
#include "refault.h"
#include "unwind.h"
#include "resident.h"

/* The helpers used (probe_read_user, task storage) require a GPL-compatible license. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

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
const enum fault_pc *unused_fault_pc __attribute__((unused));
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

/*
 * mt_forget_smpl forgets a batch of sampled blocks that user space wrote
 * into forget_batches (probes.h), with their filter counts.
 */
SEC("syscall")
int mt_forget_smpl(void *ctx)
{
	bpf_loop(FORGET_BATCH, forget_one, 0, 0);
	return 0;
}

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

/* report_site's arguments to emit_site (per CPU: a return probe does not nest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct site_args);
} site_scratch SEC(".maps");

/*
 * report_site reports the allocation s made with its charged call site
 * (emit_site), or, for an allocation from a remembered caller, without the
 * frame cache: a caller charged itself here, a wrapper (report_wrapped).
 */
static __always_inline void report_site(struct pt_regs *ctx, struct inflight *s, __u8 kind,
					__u64 addr, __u64 size, __u64 old_addr, __u64 old_size)
{
	__u8 cat = jvm_category(ctx, s);
	__u64 pc = PT_REGS_IP(ctx);
	struct site_args *a;
	__u32 zero = 0;

	if (kind == KIND_ALLOC && !s->memo_off && memo_holds(s, pc)) {
		emit(&(struct emit_args){.kind = KIND_ALLOC, .func = s->func, .addr = addr, .size = size,
					 .call_site = pc, .leaf = pc, .flags = cat << EVENT_CAT_SHIFT, .id = s->cur_id});
		return;
	}
	if (kind == KIND_ALLOC && report_wrapped(ctx, s, addr, size))
		return;
	/*
	 * The arguments live in a map, not on the stack: the return probe,
	 * emit_site, the walk's step and bpf_find_vma's callback together
	 * must fit 6.1's 512 bytes of stack across calls.
	 */
	a = bpf_map_lookup_elem(&site_scratch, &zero);
	if (!a)
		return;
	*a = (struct site_args){.addr = addr, .size = size, .old_addr = old_addr, .old_size = old_size,
				.pc = pc, .sp = PT_REGS_SP(ctx), .bp = PT_REGS_FP(ctx),
				.kind = kind, .func = s->func, .cat = cat};
	remember_site(s, pc, emit_site(a));
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
		    (bpf_get_attach_cookie(ctx) & FUNC_COOKIE_ID) == FUNC_MREMAP)
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
 * call_args reads the first three arguments of a probed call, each one
 * register later when its attach cookie has FUNC_COOKIE_CTX. Every
 * register is read at its fixed offset: a ctx offset chosen at run time
 * is refused by the verifier.
 */
static __always_inline void call_args(struct pt_regs *ctx, __u64 cookie, __u64 *a1, __u64 *a2, __u64 *a3)
{
	__u64 r1 = PT_REGS_PARM1(ctx), r2 = PT_REGS_PARM2(ctx), r3 = PT_REGS_PARM3(ctx), r4 = PT_REGS_PARM4(ctx);

	barrier_var(r1);
	barrier_var(r2);
	barrier_var(r3);
	barrier_var(r4);
	if (cookie & FUNC_COOKIE_CTX) {
		*a1 = r2;
		*a2 = r3;
		*a3 = r4;
	} else {
		*a1 = r1;
		*a2 = r2;
		*a3 = r3;
	}
}

/*
 * enter_call records the entry of an allocating call, reading its
 * function's arguments (enter); 1 when recorded. cookie is the attach
 * cookie (FUNC_COOKIE_CTX), fn the function's id.
 */
static __always_inline int enter_call(struct pt_regs *ctx, struct task_struct *t, __u64 fn, __u64 cookie)
{
	__u64 a1, a2, a3;

	call_args(ctx, cookie, &a1, &a2, &a3);

	if (fn == FUNC_PY_POOL)
		return enter(ctx, t, fn, 1ULL << ((cookie >> FUNC_COOKIE_POOL_SHIFT) & FUNC_COOKIE_POOL_MASK), 0, 0);
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
int mt_alloc_entry(struct pt_regs *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 c = bpf_get_attach_cookie(ctx), fn = c & FUNC_COOKIE_ID, id = task_id(t);
	__u64 a1, a2, a3;

	call_args(ctx, c, &a1, &a2, &a3);

	if (fn == FUNC_PY_CODE_FREE) {
		/* Whichever task: a tag kept is only ever wrong after its free. */
		if (py_code_freed(id >> 32, a1))
			emit(&(struct emit_args){.kind = KIND_PY_CODE_FREED, .addr = a1, .id = id});
		return 0;
	}
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
		enter_call(ctx, t, fn, c);
	}
	return 0;
}

/*
 * mt_jvm_entry: HotSpot's os::malloc and os::realloc in libjvm.so (and
 * os::strdup, into which os::malloc is inlined), entry only (the JVM
 * unwinds through its frames with exceptions and signals: never a return
 * probe). It remembers the NMT category argument (MEMFLAGS) and
 * where the function's code lies; the allocator call that returns into
 * that code carries the category (jvm_category). The attach cookie
 * (enum jvm_cookie) says which argument is the category and how many
 * bytes of code follow the probe.
 */
SEC("uprobe.multi")
int mt_jvm_entry(struct pt_regs *ctx)
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
	if ((bpf_get_attach_cookie(ctx) & FUNC_COOKIE_ID) == FUNC_DLOPEN) {
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
		if (ret && s->func == FUNC_PY_POOL)
			ret &= ~(s->size - 1); /* the pool of the block it returns */
		if (ret)
			alloc_done(ctx, s, ret);
		return 0;
	}
}

SEC("uretprobe.multi")
int mt_alloc_ret(struct pt_regs *ctx)
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
	 * (in_outer). Their returns always run; and only they may take a
	 * context first (FUNC_COOKIE_CTX), which the arguments below ignore.
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
int mt_alloc_sess(struct pt_regs *ctx)
{
	__u64 c = bpf_get_attach_cookie(ctx), fn = c & FUNC_COOKIE_ID, size;
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
	if (enter_call(ctx, t, fn, c))
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
int mt_exec(struct bpf_raw_tracepoint_args *ctx)
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
int mt_exit(struct bpf_raw_tracepoint_args *ctx)
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

/*
 * Resident attribution's programs (the logic is resident.h's): write faults,
 * the folio each maps, and the count of resident pages that decides.
 */

SEC("tp_btf/page_fault_user")
int mt_fault_user(__u64 *ctx)
{
	if (ctx[2] & PF_WRITE)
		on_fault(ctx[0], (struct pt_regs *)ctx[1], 0);
	return 0;
}

/*
 * A fault the kernel takes on a user address while it copies into it (a
 * read(2) into a fresh buffer): the user registers are the task's, saved
 * at the system call. In execve (the system call's number in orig_ax) it
 * is the new stack's arguments and environment being written, and the
 * registers are still the old program's.
 */
SEC("tp_btf/page_fault_kernel")
int mt_fault_kern(__u64 *ctx)
{
	struct pt_regs *regs;
	__u64 nr = 0;

	if ((__s64)ctx[0] <= 0 || !(ctx[2] & PF_WRITE))
		return 0; /* a kernel address, or a read */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	bpf_probe_read_kernel(&nr, sizeof(nr), &regs->orig_rax);
	on_fault(ctx[0], regs, nr == SYS_EXECVE || nr == SYS_EXECVEAT);
	return 0;
}

/*
 * mm_page_alloc (page, order, gfp, migratetype): the size of what a fault
 * maps is the order of the first movable folio it allocates: a 4 KiB page,
 * a transparent huge page (order 9), or an mTHP folio. Page tables and
 * slabs are not movable; a copy of a file page allocates its anonymous
 * page before it reads the file. Every page allocation on the host runs
 * this far: a test of two arguments, and of the thread's slot.
 */
SEC("tp_btf/mm_page_alloc")
int mt_page_alloc(__u64 *ctx)
{
	struct task_struct___mm *task;
	struct fault_pending *p;

	/* Before 6.2 only a huge folio matters (4 KiB pages are weighed at the fault). */
	if (!ctx[0] || (int)ctx[3] != MIGRATE_MOVABLE || (split_rss_counting() && !ctx[1]))
		return 0;
	task = (void *)bpf_get_current_task_btf();
	p = fault_slot((struct task_struct *)task);
	if (!p || p->allocated || p->task != (__u64)task)
		return 0;
	if (split_rss_counting()) {
		if (!same_fault(p, task))
			return 0;
		p->anon_at_alloc = split_anon_pages(task->mm);
	}
	p->order = (__u32)ctx[1];
	p->allocated = 1;
	return 0;
}

/*
 * rss_stat (mm, member; before 6.2 also count): a counter of mm's resident pages changed. When it
 * is the current task's anonymous pages, in a write fault of the task, the
 * fault made anonymous memory resident: its size counts towards the
 * sample, and a sampled one is reported with its stack. Exact pcs: the
 * faulting instruction, or the one after the system call (same function).
 */
SEC("tp_btf/rss_stat")
int mt_rss_stat(__u64 *ctx)
{
	struct task_struct___mm *task = (void *)bpf_get_current_task_btf();
	struct fault_pending *p;
	__u64 size;
	__u32 zero = 0;

	if ((int)ctx[1] != MM_ANONPAGES)
		return 0;
	p = fault_slot((struct task_struct *)task);
	if (!p || !p->task || p->task != (__u64)task)
		return 0;
	if (split_rss_counting()) {
		on_rss_stat_split(ctx, task, p);
		return 0;
	}
	p->task = 0;
	size = (__u64)PAGE_SIZE << (p->allocated && p->order <= FAULT_MAX_ORDER ? p->order : 0);
	/*
	 * fork counts the child's pages (another mm) in the parent's task:
	 * neither a sample nor a refault (the count still moves the
	 * countdown, which biases nothing).
	 */
	if (!fault_sample(p, size)) {
		/* A folio is aligned to its size: the huge page's first address. */
		if (ctx[0] == (__u64)task->mm)
			tell_refault(((struct task_struct *)task)->tgid, p->addr & ~(size - 1), size);
		return 0;
	}
	if (ctx[0] != (__u64)task->mm)
		return 0;
	regs_to_slot(p, task);
	if (!p->pc) {
		tell_refault(((struct task_struct *)task)->tgid, p->addr & ~(size - 1), size);
		return 0;
	}
	struct fault_site_key k = {.pc = p->pc, .pid = ((struct task_struct *)task)->tgid, .mm = ctx[0]};
	struct site_args a = {.addr = p->addr & ~(size - 1), .size = size, .pc = p->pc, .sp = p->sp, .bp = p->bp,
			      .old_size = fault_sample_bytes, .kind = KIND_FAULT, .exact = 1, .fault = 1};
	struct stack_record *rec;
	__u8 one = 1;
	/*
	 * A Python process's faults always walk: their charge is the Python
	 * line the walk reads (python.h), which no faulting pc tells (host
	 * mode charged 16 MiB of a script to pymalloc's unnamed helpers).
	 */
	int known_sites = !stack_depth && !py_process(k.pid);

	if (known_sites && bpf_map_lookup_elem(&fault_sites, &k)) {
		charge_page(k.pid, a.addr);
		emit(&(struct emit_args){.kind = KIND_FAULT, .addr = a.addr, .size = a.size,
					 .old_size = a.old_size, .call_site = a.pc, .leaf = a.pc});
		return 0;
	}
	emit_site(&a);
	/* The walk left its state in scratch: the leaf itself charged, and named? */
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (known_sites && rec && walk_charges_leaf(&rec->w))
		bpf_map_update_elem(&fault_sites, &k, &one, BPF_ANY);
	return 0;
}

/*
 * mt_file_key tells user space the key the walk will see for a file: the
 * loader maps the file in its own process and runs this on the mapping
 * (BPF_PROG_RUN), so that tables loaded ahead of time are found whatever
 * stat says (overlayfs and btrfs report other devices and inodes).
 */
SEC("syscall")
int mt_file_key(struct file_key_query *q)
{
	struct vma_found v = {.addr = q->addr};

	q->found = 0;
	if (bpf_find_vma(bpf_get_current_task_btf(), v.addr, vma_file, &v, 0) || v.found != VMA_FILE)
		return 0;
	q->key = v.key;
	q->found = 1;
	return 0;
}
