/*
 * The frame cache of the stack walk (unwind.h), included by memtrace.bpf.c.
 *
 * A call site seen once is decided once: what the walk learns of a pc (its
 * file's key and flags, its row, whether it is a wrapper or unnamed) is
 * kept per process and pc, so that the next allocation from there costs
 * one hash lookup instead of bpf_find_vma, a hash lookup and a binary
 * search. Measured with make bench (per-program figures): the return probe
 * of exact mode spent most of its time there.
 *
 * An entry is valid for its process's address space (its mm, which exec
 * replaces) and one epoch, host-wide: a new epoch begins when a traced
 * process unmaps part of a file mapping through libc's munmap, maps a
 * file executable through libc's mmap, or dlopen returns (a library mapped
 * where a dlclosed one was may reuse its addresses; ld.so maps and unmaps
 * with its own system calls, which no probe sees). These are rare, and
 * one counter read per event is cheaper than a per-process lookup. Only
 * pcs in file mappings with a table are cached: anonymous code (a JIT) is
 * never.
 */
/*
 * Provides: the frame_cache and frame_epoch maps; frames_epoch, frames_mm,
 * frames_valid, frames_invalidate, frames_unmap; task_xol.
 * Needs: probes.h (memtrace.h's struct file_key and struct unwind_row,
 * kernel.h's task and mm types).
 */
#ifndef MEMTRACE_FRAMES_H
#define MEMTRACE_FRAMES_H

#include "probes.h"

/* What the walk needs of a frame, cached. */
struct frame_info {
	__u64 epoch;
	__u64 mm;
	struct file_key key;   /* the file the pc is mapped from */
	struct unwind_row row; /* its row, when has_row */
	__u32 file_flags;      /* FILE_* of the file */
	__u8 has_row;
	__u8 pad[3];
};

struct frame_key {
	__u64 pc; /* the address the walk looks up (a return address - 1) */
	__u32 pid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct frame_key);
	__type(value, struct frame_info);
} frame_cache SEC(".maps");

/* The current epoch of the frame cache. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} frame_epoch SEC(".maps");

/* frames_epoch returns the cache's epoch (0: none, no caching). */
static __always_inline __u64 frames_epoch(void)
{
	__u32 zero = 0;
	__u64 *e = bpf_map_lookup_elem(&frame_epoch, &zero);

	return e ? *e + 1 : 0;
}

/*
 * frames_mm returns the current process's address space, as a number (a
 * load through the task's BTF pointer: BPF_CORE_READ would be a helper call).
 */
static __always_inline __u64 frames_mm(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return (__u64)t->mm;
}

/*
 * task_xol returns the address of the task's uprobe page (return probes'
 * trampolines), 0 for none. Loads through the task's BTF pointer, not
 * BPF_CORE_READ: each of its steps is a helper call.
 */
static __always_inline __u64 task_xol(struct task_struct *t)
{
	struct xol_area *x = t->mm->uprobes_state.xol_area;

	return x ? x->vaddr : 0;
}

/* frames_valid reports whether a cached frame holds for the walk's process now. */
static __always_inline int frames_valid(struct frame_info *fi, __u64 epoch, __u64 mm)
{
	return fi && epoch && fi->epoch == epoch && fi->mm == mm;
}

/* frames_invalidate begins a new epoch: every cached frame is forgotten. */
static __always_inline void frames_invalidate(void)
{
	__u32 zero = 0;
	__u64 *e = bpf_map_lookup_elem(&frame_epoch, &zero);

	if (e)
		__sync_fetch_and_add(e, 1);
}

/* What bpf_find_vma found at munmap's address. */
struct vma_is_file {
	__u8 file;
};

static long vma_has_file(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct vma_is_file *v = ctx;

	v->file = BPF_CORE_READ(vma, vm_file) != 0;
	return 0;
}

/*
 * frames_unmap invalidates the cache when munmap(addr) hits a file
 * mapping: anonymous unmappings (the allocator returning memory) are the
 * frequent ones and hold no code the walk caches.
 */
static __always_inline void frames_unmap(__u64 addr)
{
	struct vma_is_file v = {};

	if (bpf_find_vma(bpf_get_current_task_btf(), addr, vma_has_file, &v, 0) == 0 && v.file)
		frames_invalidate();
}

#endif
