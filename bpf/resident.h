/*
 * Resident attribution, included by memtrace.bpf.c: who made anonymous
 * memory resident. A page becomes resident at the fault that first writes
 * it, and the kernel takes that fault anyway: a tracepoint on it adds no
 * trap, and faults are ~100x rarer than allocations.
 *
 * Every write fault that makes anonymous memory resident counts the bytes
 * it mapped (4 KiB, or 2 MiB for a transparent huge page) towards a
 * countdown of bytes to the next sample, a draw from Exp(mean
 * fault_sample_bytes), as sampled mode does for allocations: a fault of
 * size bytes is sampled with probability 1 - e^(-size/fault_sample_bytes),
 * independently of every other, and reported with its size. The size is
 * known only once the kernel has counted the pages resident (rss_stat,
 * below): the decision is taken there, and only a sampled fault pays for
 * the stack walk and a ring record. How long the pages stay resident is
 * for user space to tell, from /proc/PID/pagemap: that covers munmap,
 * madvise, mremap, exit, exec, reclaim and swap at once, and costs the
 * faults nothing; a page released and faulted again between two checks
 * is told by its new fault (refault_slots, below).
 */
/*
 * Provides: fault_sample_bytes and fault_pid_filter, the fault_pids,
 * fault_pending and fault_sites maps, and the logic of the fault programs
 * (on_fault, on_rss_stat_split, tell_refault, fault_sample), which
 * memtrace.bpf.c's mt_fault_user, mt_fault_kern, mt_page_alloc and
 * mt_rss_stat run. Needs (included here): probes.h (emit, task_id,
 * sample.h's draw_mean), refault.h and unwind.h (emit_site, scratch). The
 * refault slots are tested by test_unwind.bpf.c.
 */
#ifndef MEMTRACE_RESIDENT_H
#define MEMTRACE_RESIDENT_H

#include "probes.h"
#include "refault.h"
#include "unwind.h"

#define PAGE_SIZE 4096
/* x86 page fault error code bits. */
#define PF_WRITE 0x2
/* x86-64 system call numbers: execve and execveat. */
#define SYS_EXECVE 59
#define SYS_EXECVEAT 322

/*
 * Set by the loader. fault_sample_bytes: the mean bytes made resident by
 * faults between samples; 0 = resident attribution off (its programs are not
 * attached). fault_pid_filter: -p and --, only the processes in fault_pids
 * (a tracepoint has no PID filter of its own).
 */
const volatile __u64 fault_sample_bytes = 0;
const volatile __u8 fault_pid_filter = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} fault_pids SEC(".maps");

/*
 * The fault programs take the thread's ids from the task (loads through its
 * BTF pointer, task_id), not from bpf_get_current_pid_tgid: every fault
 * runs three programs, and a helper call fewer in each is ~20 ns a fault
 * (measured).
 */
static __always_inline int fault_wanted(struct task_struct *task)
{
	__u32 pid = task->tgid;

	if (fault_pid_filter)
		return bpf_map_lookup_elem(&fault_pids, &pid) != 0;
	return wanted_task(task);
}

/*
 * A write fault waits here, per thread, for the kernel to say what it made
 * resident: the size of the fault is known only then. rss_stat fires in
 * the same fault once the pages are counted, with interrupts on, when the
 * fault made anonymous memory resident (MM_ANONPAGES grew: a new page, a
 * copy of the zero page or of a file page); a fault that ends otherwise
 * (a file page, a copy-on-write between anonymous pages, an error) leaves
 * its slot, overwritten by the thread's next fault. Per thread, not per
 * CPU: a fault that maps a huge page zeroes 2 MiB, and may move to another
 * CPU on the way. Slots are indexed by thread id; two threads that share a
 * slot and fault at the same moment lose one fault (task tells them apart).
 */
#define FAULT_SLOTS 4096

struct fault_pending {
	/* What every fault reads and writes, first: 32 bytes, half a cache line. */
	__u64 task; /* the faulting task; 0: none waits */
	__u64 addr;
	/*
	 * The countdown of bytes to the next sample, kept here to spare a
	 * lookup: the faults of the threads that share a slot form one
	 * sequence, and each fault's chance stays independent of all others
	 * (the exponential has no memory). Two CPUs that update it at once
	 * lose one update, which biases nothing either.
	 */
	__s64 left;
	__u32 order; /* of the first movable folio the fault allocated */
	__u8 allocated;
	__u8 drawn; /* left holds a draw */
	__u8 in_execve; /* the fault is execve's own write (on_fault) */
	__u8 pad;
	/* Then what only a sampled fault or a huge page needs: 64 bytes in all. */
	/*
	 * Before 6.2: the process's anonymous page count as the fault
	 * allocated a huge folio; rss_stat's count must be that plus the
	 * folio, or the count it reports is not this fault's.
	 */
	__s64 anon_at_alloc;
	__u64 pc, sp, bp; /* the registers the walk starts from */
	/*
	 * Before 6.2: the faulting instruction (or the system call's, for a
	 * fault in the kernel's copy). Nothing ends a 4 KiB fault's wait
	 * there, so a later huge folio counts as the fault's only while the
	 * task's user registers are still the fault's (same_fault).
	 */
	__u64 fault_ip;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FAULT_SLOTS);
	__type(key, __u32);
	__type(value, struct fault_pending);
} fault_pending SEC(".maps");

static __always_inline struct fault_pending *fault_slot(struct task_struct *task)
{
	__u32 slot = (__u32)task->pid & (FAULT_SLOTS - 1);

	return bpf_map_lookup_elem(&fault_pending, &slot);
}

static __always_inline __s64 fault_draw(void)
{
	return draw_mean(fault_sample_bytes);
}

/*
 * fault_sample decides whether a fault that made size bytes resident is
 * sampled: the countdown drops by size, and the fault is sampled when it
 * crosses zero, with probability 1 - e^(-size/fault_sample_bytes)
 * (user space weighs each sample by size over that).
 */
static __always_inline int fault_sample(struct fault_pending *p, __u64 size)
{
	if (!p->drawn) {
		p->left = fault_draw();
		p->drawn = 1;
	}
	p->left -= size;
	if (p->left > 0)
		return 0;
	p->left = fault_draw();
	return 1;
}

/*
 * Faulting instructions already known to be charged themselves (a named
 * function that is no memory function, its walk with every table in:
 * walk_charges_leaf), per
 * address space: most faults come from a few loops, and a known one is
 * reported without a walk (without --detail; never in a Python process,
 * whose faults are charged to the Python line the walk reads). The mm pointer keys the
 * address space, so an exec (a new mm) never finds the old program's.
 * (An instruction loaded later at the same address, after a dlclose and
 * a dlopen, could be charged as the old one was: entries are not
 * invalidated.)
 */
struct fault_site_key {
	__u64 mm;
	__u64 pc;
	__u64 pid; /* with mm: a freed mm_struct reused by another process is another key */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct fault_site_key);
	__type(value, __u8);
} fault_sites SEC(".maps");

/*
 * emit_refault writes a refault record. A global function: its record's
 * arguments stay off the fault programs' stacks, which 6.1's verifier
 * counts with the walk's (mt_rss_stat's went past 512 bytes).
 */
__noinline int emit_refault(__u64 addr, __u64 size)
{
	emit(&(struct emit_args){.kind = KIND_REFAULT, .addr = addr, .size = size});
	return 0;
}

/* tell_refault_range tells user space that a huge page's piece [addr, addr + size) is resident anew. */
static __always_inline void tell_refault_range(__u64 addr, __u64 size)
{
	if (size)
		emit_refault(addr, size);
}

/* tell_refault tells user space that a fault not sampled made [addr, addr + size) resident again, if it may matter. */
static __always_inline void tell_refault(__u32 tgid, __u64 addr, __u64 size)
{
	struct refault_slot *r;

	if (size == PAGE_SIZE) {
		r = refault_slot_of(tgid, addr);
		if (!r || r->charged == r->uncharged)
			return;
	}
	emit_refault(addr, size);
}

struct task_struct___mm {
	void *mm;
} __attribute__((preserve_access_index));

/* MM_ANONPAGES of enum mm_counter_type (rss_stat's member). */
#define MM_ANONPAGES 1

/* Kernels before 6.2 cache RSS counts per task (task_struct.rss_stat). */
struct task_rss_stat {
	int events;
} __attribute__((preserve_access_index));

struct task_struct___split_rss {
	struct task_rss_stat rss_stat;
} __attribute__((preserve_access_index));

static __always_inline int split_rss_counting(void)
{
	return bpf_core_field_exists(((struct task_struct___split_rss *)0)->rss_stat);
}

/* Before 6.2 an mm's counts are atomics (mm_struct.rss_stat.count[]). */
struct atomic_count___split_rss {
	__s64 counter;
} __attribute__((preserve_access_index));

struct mm_rss_stat___split_rss {
	struct atomic_count___split_rss count[4];
} __attribute__((preserve_access_index));

struct mm_struct___split_rss {
	struct mm_rss_stat___split_rss rss_stat;
} __attribute__((preserve_access_index));

static __always_inline __s64 split_anon_pages(void *mm)
{
	return BPF_CORE_READ((struct mm_struct___split_rss *)mm, rss_stat.count[MM_ANONPAGES].counter);
}

/* migratetype of a user page: anonymous folios and the page cache. */
#define MIGRATE_MOVABLE 1
/* The largest folio a fault maps (a PMD: 2 MiB); bounds a bad order. */
#define FAULT_MAX_ORDER 9

/*
 * execve_regs charges a fault of execve's own to FAULT_PC_EXECVE, with no
 * stack: the registers are the old program's.
 */
static __always_inline void execve_regs(struct fault_pending *p)
{
	if (p->in_execve) {
		p->pc = FAULT_PC_EXECVE;
		p->sp = 0;
		p->bp = 0;
	}
}

/*
 * regs_to_slot reads the task's user registers (the faulting instruction,
 * or the system call's) into its slot, pc 0 when they cannot be read. Into
 * the map value: a struct pt_regs on the stack took 6.1's verifier past
 * its 512 bytes for the walk's calls.
 */
static __noinline void regs_to_slot(struct fault_pending *p, struct task_struct___mm *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs((struct task_struct *)task);

	if (p->in_execve) {
		execve_regs(p);
		return;
	}
	if (bpf_probe_read_kernel(&p->pc, sizeof(p->pc), &PT_REGS_IP(regs)) ||
	    bpf_probe_read_kernel(&p->sp, sizeof(p->sp), &PT_REGS_SP(regs)) ||
	    bpf_probe_read_kernel(&p->bp, sizeof(p->bp), &PT_REGS_FP(regs)))
		p->pc = 0;
}

/* same_fault: the task's user registers are still at the noted fault's instruction (before 6.2). */
static __always_inline int same_fault(struct fault_pending *p, struct task_struct___mm *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs((struct task_struct *)task);
	__u64 ip = 0;

	return !bpf_probe_read_kernel(&ip, sizeof(ip), &PT_REGS_IP(regs)) && ip && ip == p->fault_ip;
}

/*
 * on_fault notes a write fault at address: user regs (a kernel pointer)
 * are at the faulting instruction, or, for a fault taken by the kernel
 * copying into user memory (read(2)), at the system call. From 6.2 the
 * thread's slot waits for rss_stat, which samples; before, the fault's
 * first 4 KiB are sampled here, and a huge page's rest at rss_stat.
 */
static __always_inline void on_fault(__u64 address, struct pt_regs *uregs, __u8 in_execve)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fault_pending *p;

	if (!fault_wanted(task))
		return;
	p = fault_slot(task);
	if (!p)
		return;
	p->addr = address;
	p->allocated = 0;
	p->in_execve = in_execve;
	p->task = (__u64)task;
	if (!split_rss_counting())
		return;
	if (bpf_probe_read_kernel(&p->fault_ip, sizeof(p->fault_ip), &PT_REGS_IP(uregs)))
		p->fault_ip = 0;
	/*
	 * Before 6.2 rss_stat fires for a 4 KiB page only every 64 faults:
	 * sample and walk here, a page each. A huge page is counted at once
	 * (add_mm_counter, not the task's cache): the rest of it is weighed
	 * at rss_stat (on_rss_stat_split). The three
	 * registers go straight into the map value: a struct pt_regs on the
	 * stack took 6.1's verifier past its 512 bytes for the walk's calls.
	 * The charged frame is right (it is found before the walk leaves the
	 * first file); a stack stops at its second file.
	 */
	if (!fault_sample(p, PAGE_SIZE) || bpf_probe_read_kernel(&p->pc, sizeof(p->pc), &PT_REGS_IP(uregs)) ||
	    bpf_probe_read_kernel(&p->sp, sizeof(p->sp), &PT_REGS_SP(uregs)) ||
	    bpf_probe_read_kernel(&p->bp, sizeof(p->bp), &PT_REGS_FP(uregs))) {
		/* Any write fault, as any may be sampled here (a COW copy's too). */
		tell_refault(task->tgid, address & ~(__u64)(PAGE_SIZE - 1), PAGE_SIZE);
		return;
	}
	execve_regs(p);
	struct site_args a = {.addr = address & ~(__u64)(PAGE_SIZE - 1), .size = PAGE_SIZE, .pc = p->pc, .sp = p->sp,
			      .bp = p->bp, .old_size = fault_sample_bytes, .kind = KIND_FAULT, .exact = 1, .fault = 1};

	emit_site(&a); /* which charges the page (charge_page) */
}

/*
 * Before 6.2 a fault that maps a huge page counts its pages in the mm at
 * once (rss_stat (mm, member, count)), after the folio's allocation; a
 * count the fault makes before (the task's cache, synced as the fault
 * starts) comes before it. The first count in the same fault (the same
 * user registers) that grew by the folio at least since its allocation
 * is the fault's (other threads' counts in between only add to it). The
 * fault's first 4 KiB were weighed at the fault; the rest of the folio is
 * weighed here, as a piece of its own (both pieces are sampled
 * independently, so the estimate stays unbiased). It is reported at the
 * folio's first page, or at its second when the fault's own page is the
 * first (a sampled page is keyed by address).
 */
static __always_inline void on_rss_stat_split(__u64 *ctx, struct task_struct___mm *task, struct fault_pending *p)
{
	__u64 size, base, addr, page;

	if (!p->allocated || !p->order || p->order > FAULT_MAX_ORDER ||
	    (__s64)ctx[2] - p->anon_at_alloc < (1LL << p->order) || ctx[0] != (__u64)task->mm ||
	    !same_fault(p, task))
		return;
	p->task = 0;
	size = (__u64)PAGE_SIZE << p->order;
	if (!fault_sample(p, size - PAGE_SIZE)) {
		/* Around the fault's own page, which on_fault told or sampled. */
		base = p->addr & ~(size - 1);
		page = p->addr & ~(__u64)(PAGE_SIZE - 1);
		tell_refault_range(base, page - base);
		tell_refault_range(page + PAGE_SIZE, base + size - page - PAGE_SIZE);
		return;
	}
	regs_to_slot(p, task);
	if (!p->pc)
		return;
	base = p->addr & ~(size - 1);
	addr = (p->addr & ~(__u64)(PAGE_SIZE - 1)) == base ? base + PAGE_SIZE : base;
	struct site_args a = {.addr = addr, .size = size - PAGE_SIZE, .pc = p->pc, .sp = p->sp, .bp = p->bp,
			      .old_size = fault_sample_bytes, .kind = KIND_FAULT, .exact = 1, .fault = 1};

	emit_site(&a);
}

#endif
