//go:build ignore

/*
 * The page-table walk of access statistics (package pagewalk): an iter/task_vma
 * program that, for one process's anonymous mappings within [lo, hi), copies
 * each page table of last level (512 PTEs, 2 MiB of address space) into a hash
 * map keyed by its address, or the entry of a huge page (2 MiB or 1 GiB). User
 * space reads the accessed and dirty bits out of them: the walk is read-only,
 * and /proc/PID/clear_refs clears the accessed bits between two walks.
 *
 * Page tables hold physical addresses; the kernel reaches them through its
 * direct map at page_offset_base, which KASLR places at a random 1 GiB
 * boundary and which no symbol or BTF variable shows here. It is found once
 * (calibrate): the base for which the walk of the pgd's own address ends at
 * that address's physical frame.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define PTRS 512
#define ENT_PRESENT 0x1ULL
#define ENT_PSE 0x80ULL
/* Bits 12-51: a table's or page's physical address. */
#define ENT_ADDR 0x000ffffffffff000ULL
#define PMD_SIZE (1ULL << 21)
#define PUD_SIZE (1ULL << 30)
/* Physical memory looked at for the direct map's base: up to 4 TiB. */
#define CALIBRATE_STEPS 4096

struct bpf_iter_meta {
	void *seq;
} __attribute__((preserve_access_index));

struct mm_struct {
	void *pgd;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	struct mm_struct *vm_mm;
	void *vm_file;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct task_struct *real_parent;
	void *files;
} __attribute__((preserve_access_index));

struct bpf_iter__task_vma {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	struct vm_area_struct *vma;
} __attribute__((preserve_access_index));

/* What to walk, set by user space before each walk; base is found by the
 * first walk and kept. */
struct walk_cfg {
	__u64 lo, hi;
	__u64 base; /* page_offset_base; 0 until calibrated */
	__u32 tgid;
	__u32 levels; /* 4 or 5 */
	__u64 tables; /* out: tables copied by the last walk */
	__u64 failed; /* out: entries that could not be read */
	__u64 vmas;   /* out: the process's mappings visited */
	__u64 walked; /* out: its anonymous mappings walked (in range) */
};

/* A last-level table (level 1) or a huge page's entry (level 2: 2 MiB, 3: 1 GiB). */
struct pmd_copy {
	__u64 entry;
	__u64 level;
	__u64 pte[PTRS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_cfg);
} cfg_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pmd_copy);
} scratch SEC(".maps");

/* 2^18 tables: 512 GiB of mapped memory per walk. Allocated as filled. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct pmd_copy);
} tables SEC(".maps");

static __always_inline __u64 idx(__u64 va, int shift)
{
	return (va >> shift) & (PTRS - 1);
}

/* rd reads the 8-byte entry at kernel address a; 0 when it cannot. */
static __always_inline __u64 rd(__u64 a)
{
	__u64 v = 0;
	if (bpf_probe_read_kernel(&v, sizeof(v), (void *)a))
		return 0;
	return v;
}

struct calib {
	__u64 pgd;    /* the pgd's (direct-mapped) address */
	__u64 obj[3]; /* addresses of objects in the direct map too */
	__u32 levels;
	__u64 found;
};

/* maps_at reports whether, with the direct map at base, the walk of the
 * kernel address v through pgd ends at v's physical frame. */
static __always_inline int maps_at(__u64 pgd, __u32 levels, __u64 base, __u64 v)
{
	__u64 phys = v - base;
	__u64 e = rd(pgd + idx(v, levels == 5 ? 48 : 39) * 8);
	if (!(e & ENT_PRESENT))
		return 0;
	if (levels == 5) {
		e = rd(base + (e & ENT_ADDR) + idx(v, 39) * 8);
		if (!(e & ENT_PRESENT))
			return 0;
	}
	e = rd(base + (e & ENT_ADDR) + idx(v, 30) * 8); /* pud */
	if (!(e & ENT_PRESENT))
		return 0;
	if (e & ENT_PSE)
		return (e & ENT_ADDR & ~(PUD_SIZE - 1)) == (phys & ~(PUD_SIZE - 1));
	e = rd(base + (e & ENT_ADDR) + idx(v, 21) * 8); /* pmd */
	if (!(e & ENT_PRESENT))
		return 0;
	if (e & ENT_PSE)
		return (e & ENT_ADDR & ~(PMD_SIZE - 1)) == (phys & ~(PMD_SIZE - 1));
	e = rd(base + (e & ENT_ADDR) + idx(v, 12) * 8); /* pte */
	return (e & ENT_PRESENT) && (e & ENT_ADDR) == (phys & ENT_ADDR);
}

/* calibrate_one tries base candidate i: the direct map's base that puts the
 * pgd's page i GiB above the 1 GiB boundary below its address. A wrong
 * base can pass one address's check by chance (the entry read from a
 * wrong page happening to match): it must pass the pgd's and three
 * other objects'. */
static long calibrate_one(__u64 i, struct calib *c)
{
	__u64 base = (c->pgd & ~(PUD_SIZE - 1)) - i * PUD_SIZE;
	if (!maps_at(c->pgd, c->levels, base, c->pgd))
		return 0;
	for (int j = 0; j < 3; j++)
		if (c->obj[j] < base || !maps_at(c->pgd, c->levels, base, c->obj[j]))
			return 0;
	c->found = base;
	return 1;
}

struct walk {
	struct walk_cfg *cfg;
	__u64 pgd;
	__u64 addr, end;
};

/* save copies what *s holds, for the 2 MiB at key. */
static __always_inline void save(struct walk_cfg *cfg, __u64 key, struct pmd_copy *s)
{
	if (bpf_map_update_elem(&tables, &key, s, BPF_ANY) == 0)
		cfg->tables++;
	else
		cfg->failed++;
}

/* walk_one handles the 2 MiB (or the empty table's span) at w->addr and
 * moves past it. */
static long walk_one(__u64 i, struct walk *w)
{
	struct walk_cfg *cfg = w->cfg;
	__u64 base = cfg->base, va = w->addr;
	__u32 zero = 0;
	if (va >= w->end)
		return 1;
	struct pmd_copy *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 1;
	int top = cfg->levels == 5 ? 48 : 39;
	__u64 e = rd(w->pgd + idx(va, top) * 8);
	if (!(e & ENT_PRESENT)) {
		w->addr = (va | ((1ULL << top) - 1)) + 1;
		return 0;
	}
	if (cfg->levels == 5) {
		e = rd(base + (e & ENT_ADDR) + idx(va, 39) * 8);
		if (!(e & ENT_PRESENT)) {
			w->addr = (va | ((1ULL << 39) - 1)) + 1;
			return 0;
		}
	}
	e = rd(base + (e & ENT_ADDR) + idx(va, 30) * 8);
	if (!(e & ENT_PRESENT)) {
		w->addr = (va | (PUD_SIZE - 1)) + 1;
		return 0;
	}
	if (e & ENT_PSE) {
		s->entry = e;
		s->level = 3;
		save(cfg, va & ~(PUD_SIZE - 1), s);
		w->addr = (va | (PUD_SIZE - 1)) + 1;
		return 0;
	}
	e = rd(base + (e & ENT_ADDR) + idx(va, 21) * 8);
	w->addr = (va | (PMD_SIZE - 1)) + 1;
	if (!(e & ENT_PRESENT))
		return 0;
	s->entry = e;
	if (e & ENT_PSE) {
		s->level = 2;
	} else {
		s->level = 1;
		if (bpf_probe_read_kernel(s->pte, sizeof(s->pte), (void *)(base + (e & ENT_ADDR)))) {
			cfg->failed++;
			return 0;
		}
	}
	save(cfg, va & ~(PMD_SIZE - 1), s);
	return 0;
}

SEC("iter/task_vma")
int walk_vmas(struct bpf_iter__task_vma *ctx)
{
	struct task_struct *task = ctx->task;
	struct vm_area_struct *vma = ctx->vma;
	__u32 zero = 0;
	if (!task || !vma)
		return 0;
	struct walk_cfg *cfg = bpf_map_lookup_elem(&cfg_map, &zero);
	if (!cfg || task->tgid != cfg->tgid)
		return 0;
	cfg->vmas++;
	if (vma->vm_file)
		return 0;
	__u64 start = vma->vm_start, end = vma->vm_end;
	if (start < cfg->lo)
		start = cfg->lo;
	if (end > cfg->hi)
		end = cfg->hi;
	if (start >= end)
		return 0;
	struct mm_struct *mm = vma->vm_mm;
	if (!mm)
		return 0;
	/* Read, not loaded: a scalar the walk can compute with. */
	__u64 pgd = (__u64)BPF_CORE_READ(mm, pgd);
	if (!pgd)
		return 0;
	if (!cfg->base) {
		struct calib c = {.pgd = pgd, .levels = cfg->levels,
				  /* Read, not loaded: scalars, as pgd. */
				  .obj = {(__u64)BPF_CORE_READ(vma, vm_mm), (__u64)BPF_CORE_READ(task, real_parent),
					  (__u64)BPF_CORE_READ(task, files)}};
		bpf_loop(CALIBRATE_STEPS, calibrate_one, &c, 0);
		if (!c.found) {
			cfg->failed++; /* with base 0: user space reports it */
			return 0;
		}
		cfg->base = c.found;
	}
	cfg->walked++;
	struct walk w = {.cfg = cfg, .pgd = pgd, .addr = start, .end = end};
	/* One step per 2 MiB (more over an empty table): 16 TiB per mapping. */
	bpf_loop(1 << 23, walk_one, &w, 0);
	return 0;
}
