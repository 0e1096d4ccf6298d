/*
 * The user-stack walk of memtrace's return probe, included by memtrace.bpf.c.
 *
 * At the allocator's return the registers are its caller's (ip is the return
 * address, sp and rbp are the caller's), so the walk starts there. Each step
 * finds the file the pc is mapped from (bpf_find_vma: no table of processes'
 * mappings to keep, so it works host-wide, after dlopen and after exec),
 * then that file's unwind rows (built by unwind/ in Go from .eh_frame and
 * .debug_frame, keyed by the file's dev and inode), binary-searches the row
 * of the pc and applies it: CFA from rsp or rbp, the return address at
 * CFA - 8, rbp reloaded where the row says it was saved. A file with no
 * unwind information, and code no file backs (a JIT's), is walked by frame
 * pointers. Anything else ends the walk, and the stack is marked
 * truncated: frames are never guessed.
 *
 * The same walk decides who is charged: the first frame, within
 * MAX_WRAPPER_FRAMES, that is neither an allocation wrapper (operator new,
 * strdup, zmalloc, …) nor unnamed code (no symbol of its file covers it: a
 * stripped library's internal allocation helpers). Unnamed frames are
 * skipped only when the named function above them is in their own file,
 * so frames past MAX_WRAPPER_FRAMES are looked at, up to MAX_CHAIN_FRAMES,
 * only while that can still be so: after a wrapper, or while the unnamed
 * frames since it are all in one file that has named functions. When the
 * walk cannot get that far, the frame above the last wrapper seen is
 * charged, or the allocator's caller. No probe is placed on the wrappers,
 * so nothing can stand in the way of an exception unwinding through them.
 */
/*
 * Provides: the scratch map and the walk (struct walk, walk_start,
 * walk_frame), emit_site (an event with its charged call site and stack),
 * outer_frame, vma_file and struct file_key_query (mt_file_key in
 * memtrace.bpf.c). Needs (included here): probes.h (the events ring and
 * emit, count_lost, wake_flags, the unwind_rows and unwind_files maps,
 * stack_depth, struct inflight), frames.h (the frame cache) and refault.h
 * (charge_page). Tested on synthetic stacks by
 * test_unwind.bpf.c (tracer/bpf_unwind_test.go).
 */
#ifndef MEMTRACE_UNWIND_H
#define MEMTRACE_UNWIND_H

#include "probes.h"
#include "frames.h"
#include "refault.h"

/* How a step ended. */
enum {
	STEP_OK = 0,
	STEP_END = 1,  /* the outermost frame: the stack is complete */
	STEP_STOP = 2, /* cannot go on: the stack is truncated */
};

/* The walk's state, on the return probe's stack; frames go to scratch. */
struct walk {
	__u64 pc;         /* the current frame's pc */
	__u64 sp;         /* its CFA's base: the sp after the return into it */
	__u64 bp;
	__u64 charged_pc; /* the charged frame's pc */
	__u32 n;          /* frames kept in scratch (frames[0] is the leaf) */
	__u32 charged;    /* index of the charged frame */
	__u32 limit;      /* keep frames up to index limit - 1; 0: keep none */
	__u8 chain;       /* every frame so far is a wrapper or unnamed */
	__u8 exact;       /* pc is exact (interrupted by a signal), not a return address */
	__u8 end;         /* STEP_END or STEP_STOP once the walk is over */
	__u8 cached;      /* map_* and file describe the last file mapping met */
	__u8 fault;       /* a page fault's walk: libc's memory functions are wrappers too */
	__u32 pid;
	__u64 epoch;      /* the frame cache's epoch (frames.h); 0: none */
	__u64 mm;         /* the process's address space */
	__u64 xol;        /* its uprobe page (return probes' trampoline); 0: none */
	__u64 leaf;       /* the walk's first pc */
	__s32 leaf_off;   /* the leaf is a wrapper with an sp-based CFA: its offset; 0: not */
	__u8 memo;        /* the leaf is such a wrapper and its caller is charged itself */
	__u8 no_table;    /* a frame's file had no table yet: walked by frame pointers there */
	__u8 anon_code;   /* the current frame is code no file backs (JIT) */
	__u8 jit;         /* the charged frame is JIT code: frames are kept from it on */
	/*
	 * The last mapping met and its file's rows: consecutive frames are
	 * mostly in one file, and bpf_find_vma is the walk's dearest step.
	 */
	__u64 map_start, map_end, map_delta; /* offset in file = pc + map_delta */
	struct unwind_file file;
	struct file_key map_key;
	/*
	 * The unnamed frames met since the last wrapper: none, all in
	 * anon_key's file, or in several files or a file without names (no
	 * named frame above them is charged).
	 */
	struct file_key anon_key;
	__u8 anon;
	/*
	 * outer_frame's question: is the frame entered at outer_sp (its CFA
	 * outer_sp + 8) still the skipped call's, whose code from the probe on
	 * is [outer_lo, outer_hi), in the mapping [outer_map_lo, outer_map_hi)
	 * of its file (whose FILE_* flags are outer_file)? outer_sp 0: not
	 * asked. outer: enum outer_frame_answer.
	 */
	__u8 outer;
	__u8 outer_anon;  /* the frame the walk is leaving is unnamed code */
	__u32 outer_file;
	__u64 outer_sp, outer_lo, outer_hi, outer_map_lo, outer_map_hi;
	__u64 outer_pc;   /* the pc of the frame the walk is leaving */
};

/* outer_frame's answers. */
enum { OUTER_FRAME_UNKNOWN = 0, OUTER_FRAME_SAME = 1, OUTER_FRAME_OTHER = 2 };

enum { ANON_NONE, ANON_ONE_FILE, ANON_FILES };

/*
 * An event with its stack, assembled in a per-CPU map before it is copied
 * to the ring, and the walk's state.
 */
struct stack_record {
	struct event e;
	__u64 frames[STACK_WORDS]; /* native frames, then Python's (python.h), PY_WORDS at most */
	struct walk w;
	struct frame_key fk; /* emit_site's frame-cache key: off the stack (6.1's 512 bytes across calls) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_record);
} scratch SEC(".maps");

#include "python.h"

/* What bpf_find_vma found for an address. */
struct vma_found {
	__u64 addr;
	__u64 off; /* addr's offset in the file */
	__u64 start, end;
	struct file_key key;
	__u8 found;
};

/* What vma_file found: a file's mapping, or code no file backs. */
enum { VMA_NONE = 0, VMA_FILE = 1, VMA_ANON_CODE = 2 };

#ifndef VM_EXEC
#define VM_EXEC 0x00000004
#endif

static long vma_file(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct vma_found *v = ctx;
	struct file *f = BPF_CORE_READ(vma, vm_file);

	if (!f) {
		/*
		 * Anonymous code: a JIT's (V8, HotSpot, .NET), or the vdso.
		 * The walk follows its frame pointers, which V8 keeps and
		 * HotSpot keeps with -XX:+PreserveFramePointer.
		 */
		if (BPF_CORE_READ(vma, vm_flags) & VM_EXEC) {
			v->start = BPF_CORE_READ(vma, vm_start);
			v->end = BPF_CORE_READ(vma, vm_end);
			v->off = v->addr - v->start;
			v->found = VMA_ANON_CODE;
		}
		return 0;
	}
	v->key.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	v->key.ino = BPF_CORE_READ(f, f_inode, i_ino);
	v->start = BPF_CORE_READ(vma, vm_start);
	v->end = BPF_CORE_READ(vma, vm_end);
	v->off = v->addr - v->start + (BPF_CORE_READ(vma, vm_pgoff) << 12);
	v->found = VMA_FILE;
	return 0;
}

/*
 * ask_table tells user space that the file has no table yet, once: the
 * entry marked pending is replaced when user space has built the table.
 */
static __always_inline void ask_table(struct vma_found *v)
{
	struct unwind_file pending = {.flags = FILE_PENDING};

	if (bpf_map_update_elem(&unwind_files, &v->key, &pending, BPF_NOEXIST) == 0)
		emit(&(struct emit_args){.kind = KIND_UNWIND_MISS, .addr = v->addr, .size = v->key.dev,
					 .old_addr = v->key.ino, .wake = 1});
}

/*
 * row_index returns the index of the row covering off among a file's rows
 * [first, first + count), or -1. The search halves [lo, lo + n) without
 * branching on the comparison (it is arithmetic: the verifier then has one
 * path per step to check, not two). A global function: the verifier
 * checks its loop once, not again in each state of the walk it is called
 * from (three quarters of mt_alloc_ret's verification before, and the
 * most of memtrace's start-up).
 */
__noinline __s64 row_index(__u32 first, __u32 count, __u64 off)
{
	__u32 lo = first, n = count, half, mid;
	struct unwind_row *r;
	__u64 ge;

	if (n == 0 || off > 0xffffffffULL)
		return -1;
	for (int k = 0; k < SEARCH_STEPS; k++) {
		if (n <= 1)
			break;
		half = n / 2;
		mid = lo + half;
		r = bpf_map_lookup_elem(&unwind_rows, &mid);
		if (!r)
			return -1;
		/* 1 when r->pc <= off (both below 2^32): the sign of their difference. */
		ge = 1 - (((__u64)((__s64)off - (__s64)r->pc)) >> 63);
		lo += half * ge;
		n -= half;
	}
	if (n > 1)
		return -1;
	r = bpf_map_lookup_elem(&unwind_rows, &lo);
	if (!r || r->pc > off)
		return -1;
	return lo;
}

/* find_row returns the row covering off among a file's rows, or NULL. */
static __always_inline struct unwind_row *find_row(struct unwind_file *f, __u64 off)
{
	__s64 i = row_index(f->first, f->count, off);
	__u32 k = i;

	if (i < 0)
		return 0;
	return bpf_map_lookup_elem(&unwind_rows, &k);
}

static __always_inline int read_u64(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (void *)addr);
}

/* Return probes on one thread's stack that real_return looks through. */
#define MAX_RETURN_INSTANCES 8

/*
 * trampoline_return gives the return address that the kernel's return
 * trampoline at ret replaced in the stack slot at slot: a function with a
 * return probe (malloc, when a fault in its internals is walked) returns
 * into the trampoline in the uprobe page while it runs, and the address
 * it replaced is in the thread's return instances, with the slot it was
 * in (a tail call's instance shares its caller's slot; the newest is found
 * first). 0 when not found. A global function: the verifier checks its
 * loop once, not in each state of the walk.
 */
__noinline __u64 trampoline_return(__u64 slot)
{
	struct return_instance *ri;

	ri = BPF_CORE_READ((struct task_struct *)bpf_get_current_task_btf(), utask, return_instances);
	for (int k = 0; k < MAX_RETURN_INSTANCES && ri; k++) {
		if (BPF_CORE_READ(ri, stack) == slot)
			return BPF_CORE_READ(ri, orig_ret_vaddr);
		ri = BPF_CORE_READ(ri, next);
	}
	return 0;
}

/* real_return gives the return address read from the stack slot at slot (trampoline_return). */
static __always_inline __u64 real_return(struct walk *w, __u64 ret, __u64 slot)
{
	if (!w->xol || ret < w->xol || ret >= w->xol + 4096)
		return ret;
	return trampoline_return(slot);
}

/* frame_pointer_step unwinds a frame of code without unwind information by rbp. */
static __always_inline int frame_pointer_step(struct walk *w)
{
	__u64 ret, bp;

	if (w->bp <= w->sp || read_u64(&ret, w->bp + 8) || read_u64(&bp, w->bp))
		return STEP_STOP;
	ret = real_return(w, ret, w->bp + 8);
	w->sp = w->bp + 16;
	w->bp = bp;
	w->pc = ret;
	w->exact = 0;
	return ret ? STEP_OK : STEP_STOP;
}

/* apply_row moves the walk to the caller of the current frame by its row. */
static __always_inline int apply_row(struct walk *w, struct unwind_row *r)
{
	__u64 cfa, ret, v, saved_bp = w->bp;
	__s64 off = r->cfa_off;

	switch (r->kind & ROW_KIND_MASK) {
	case UNWIND_RSP:
		cfa = w->sp + off;
		break;
	case UNWIND_RBP:
		cfa = w->bp + off;
		break;
	case UNWIND_PLT:
		/*
		 * cfa_off holds the threshold: 11 for GNU ld's lazy PLT, 9 for
		 * its IBT PLT (-z ibtplt; unwind.KindPLT).
		 */
		cfa = w->sp + 8 + ((__s64)(w->pc & 15) >= off ? 8 : 0);
		break;
	case UNWIND_DEREF_RBP:
		/* GCC's stack realignment (DRAP): the caller's rbp is at *rbp. */
		if (read_u64(&cfa, w->bp + off) || read_u64(&v, w->bp))
			return STEP_STOP;
		saved_bp = v;
		break;
	case UNWIND_SIGNAL:
		/* A handler returned into the trampoline: the ucontext is at sp. */
		if (read_u64(&v, w->sp + UC_RIP) || read_u64(&ret, w->sp + UC_RSP) ||
		    read_u64(&w->bp, w->sp + UC_RBP))
			return STEP_STOP;
		w->pc = v;
		w->sp = ret;
		w->exact = 1;
		return v ? STEP_OK : STEP_STOP;
	case UNWIND_END:
		return STEP_END;
	default:
		return STEP_STOP;
	}
	/* Callers' frames lie above: a CFA at or below sp is a wrong rule. */
	if (cfa <= w->sp || read_u64(&ret, cfa - 8) || !(ret = real_return(w, ret, cfa - 8)))
		return STEP_STOP;
	if (r->kind & ROW_RBP_SAVED) {
		if (read_u64(&v, cfa + (__s64)r->rbp_off8 * 8))
			return STEP_STOP;
		saved_bp = v;
	}
	w->bp = saved_bp;
	w->pc = ret;
	w->sp = cfa;
	w->exact = 0;
	return STEP_OK;
}

/*
 * walk_frame looks at the current frame: whether it is part of the wrapper
 * chain, then (when the walk must go on) unwinds to its caller. One call of
 * bpf_loop's callback per frame.
 */
static long walk_frame(__u64 i, void *ctx)
{
	struct stack_record *rec;
	struct walk *w;
	struct vma_found v = {};
	struct unwind_file *f;
	struct unwind_row *found, row = {}, *r = 0;
	struct frame_key fk = {};
	struct frame_info *fi, nfi = {};
	struct file_key key;
	__u32 zero = 0, fflags;
	__u8 flags = 0, charge_next = 0;
	int step;

	/*
	 * The state lives in a map value, not on the stack: the verifier then
	 * knows none of its numbers, and checks one iteration for all of them.
	 */
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec)
		return 1;
	w = &rec->w;
	v.addr = w->pc - (w->exact ? 0 : 1);

	fk.pc = v.addr;
	fk.pid = w->pid;
	/* outer_frame's walk needs every row: the cache may hold none for a frame. */
	fi = w->epoch && !w->outer_sp ? bpf_map_lookup_elem(&frame_cache, &fk) : 0;
	if (frames_valid(fi, w->epoch, w->mm)) {
		/* Seen before: no mapping, table or row to look up. */
		key = fi->key;
		fflags = fi->file_flags;
		row = fi->row;
		if (fi->has_row)
			r = &row;
		goto known;
	}
	if (w->cached && v.addr >= w->map_start && v.addr < w->map_end) {
		v.off = v.addr + w->map_delta;
	} else {
		if (bpf_find_vma(bpf_get_current_task_btf(), v.addr, vma_file, &v, 0) || !v.found) {
			w->end = STEP_STOP;
			return 1;
		}
		if (v.found == VMA_ANON_CODE) {
			/* JIT code: no table, no names; frame pointers (key 0, no dev). */
			w->file.first = 0;
			w->file.count = 0;
			w->file.flags = FILE_NO_CFI;
		} else if (!(f = bpf_map_lookup_elem(&unwind_files, &v.key)) || (f->flags & FILE_PENDING)) {
			/*
			 * The table is being built (the command does not wait for
			 * it): this frame is charged as it is, and the walk goes on
			 * by frame pointers, as in a file without CFI. outer_frame's
			 * question needs the rows: no answer.
			 */
			if (!f)
				ask_table(&v);
			if (w->outer_sp) {
				w->end = STEP_STOP;
				return 1;
			}
			w->no_table = 1;
			/* Field by field: a compound literal takes a stack slot (6.1's 512 bytes). */
			w->file.first = 0;
			w->file.count = 0;
			w->file.flags = FILE_NO_CFI | FILE_UNMARKED | FILE_PENDING;
		} else {
			w->file = *f;
		}
		w->map_key = v.key;
		w->map_start = v.start;
		w->map_end = v.end;
		w->map_delta = v.off - v.addr;
		w->cached = 1;
	}
	f = &w->file;
	w->anon_code = w->map_key.dev == 0 && (f->flags & FILE_NO_CFI);
	if (!(f->flags & (FILE_NO_CFI | FILE_UNMARKED)) || w->limit || w->outer_sp) {
		found = find_row(f, v.off);
		if (found) {
			row = *found;
			r = &row;
		}
	}
	key = w->map_key;
	fflags = f->flags;
	/* Nothing is cached of a file without its table yet: it comes later. */
	if (w->epoch && !(fflags & FILE_PENDING)) {
		nfi.epoch = w->epoch;
		nfi.mm = w->mm;
		nfi.key = key;
		nfi.row = row;
		nfi.file_flags = fflags;
		nfi.has_row = r != 0;
		bpf_map_update_elem(&frame_cache, &fk, &nfi, BPF_ANY);
	}
known:
	if (fi && frames_valid(fi, w->epoch, w->mm))
		w->anon_code = key.dev == 0 && (fflags & FILE_NO_CFI);
	if (r)
		flags = r->kind & (ROW_WRAPPER | ROW_ANON);
	/* A fault in memset, malloc's internals or read(2) is charged to the caller. */
	if (r && w->fault && (r->kind & ROW_MEMFN))
		flags = ROW_WRAPPER;
	if (w->chain) {
		if (!flags) {
			/*
			 * The first named function that is no wrapper is charged,
			 * when the unnamed frames since the last wrapper are all in
			 * its own file (a stripped library's static helpers; not a
			 * stripped program's code below libc's named start-up).
			 */
			w->chain = 0;
			if (i > 0 && (w->anon == ANON_NONE ||
				      (w->anon == ANON_ONE_FILE && w->anon_key.dev == key.dev &&
				       w->anon_key.ino == key.ino))) {
				w->charged = i;
				w->charged_pc = w->pc;
				if (stack_depth)
					w->limit = i + stack_depth;
				/* Not from a file without its table yet: it may name a wrapper. */
				w->memo = i == 1 && w->leaf_off && w->anon == ANON_NONE && !w->exact && !w->no_table;
				if (!stack_depth && w->anon_code) {
					/*
					 * JIT code is charged: keep JIT_FRAMES frames
					 * from it on, for user space to charge the
					 * program's own function past the runtime's
					 * (whose names only the runtime's perf map has).
					 */
					rec->frames[0] = w->pc | (w->exact ? FRAME_EXACT : 0);
					w->n = 1;
					w->limit = JIT_FRAMES;
					w->jit = 1;
				}
			}
		} else if (flags & ROW_WRAPPER) {
			charge_next = 1; /* the frame above, unless it is a wrapper too */
			w->anon = ANON_NONE;
			if (i == 0 && (r->kind & ROW_KIND_MASK) == UNWIND_RSP && r->cfa_off > 0)
				w->leaf_off = r->cfa_off;
		} else if (w->anon == ANON_NONE) {
			/* In a file without names no named caller in its file can be charged. */
			w->anon = fflags & FILE_NO_NAMES ? ANON_FILES : ANON_ONE_FILE;
			w->anon_key = key;
		} else if (w->anon_key.dev != key.dev || w->anon_key.ino != key.ino) {
			w->anon = ANON_FILES;
		}
	}
	if (w->outer_sp) {
		/* outer_frame's walk: only the frames up to outer_sp matter. */
		if (i >= MAX_CHAIN_FRAMES) {
			w->end = STEP_STOP;
			return 1;
		}
		w->outer_pc = w->pc;
		w->outer_anon = r && (r->kind & ROW_ANON);
	} else if (!w->chain && w->n >= w->limit) {
		/* Done: the charged frame is known and no (more) stack is wanted. */
		w->end = STEP_STOP;
		return 1;
	} else if (i >= MAX_WRAPPER_FRAMES && !w->limit && (i >= MAX_CHAIN_FRAMES || w->anon == ANON_FILES)) {
		/* Past MAX_WRAPPER_FRAMES, only a chain that can still end in a charged name goes on. */
		w->end = STEP_STOP;
		return 1;
	}
	if (r && (r->kind & ROW_KIND_MASK) == UNWIND_SIGNAL && i < w->n) {
		/* The trampoline is no return address: user space must not check it as one. */
		if (i < MAX_STACK + MAX_WRAPPER_FRAMES)
			rec->frames[i] |= FRAME_EXACT;
	}
	if (fflags & FILE_NO_CFI)
		step = frame_pointer_step(w);
	else if (r)
		step = apply_row(w, r);
	else
		step = STEP_STOP;
	if (step != STEP_OK) {
		w->end = step;
		return 1;
	}
	if (w->outer_sp && w->sp >= w->outer_sp + 8) {
		/*
		 * The frame just left was entered at outer_sp when its CFA is
		 * outer_sp + 8. The skipped call still runs there when it is
		 * the skipped function's own code, or code of its file that
		 * the function may have tail-called: any code of an allocator
		 * library, or a shared library's unnamed code (a stripped
		 * libc's internals; not a program's, whose own unnamed code the
		 * program may call). Another function there, or no frame there
		 * at all, says the call was over.
		 */
		__u64 pc = w->outer_pc;
		int same = (pc > w->outer_lo && pc <= w->outer_hi) ||
			   (pc > w->outer_map_lo && pc <= w->outer_map_hi &&
			    ((w->outer_file & FILE_ALLOCATOR) || (w->outer_anon && (w->outer_file & FILE_LIBRARY))));

		w->outer = w->sp == w->outer_sp + 8 && same ? OUTER_FRAME_SAME : OUTER_FRAME_OTHER;
		w->end = STEP_STOP;
		return 1;
	}
	if (charge_next) {
		w->charged = i + 1;
		w->charged_pc = w->pc;
		if (stack_depth)
			w->limit = i + 1 + stack_depth;
	}
	if (w->n < w->limit) {
		__u32 n = w->n;

		if (n < MAX_STACK + MAX_WRAPPER_FRAMES)
			rec->frames[n] = w->pc | (w->exact ? FRAME_EXACT : 0);
		w->n = n + 1;
	}
	return 0;
}

/*
 * walk_charges_leaf reports whether a finished walk charged its first
 * frame itself with every file's table in: the fault programs remember
 * such an instruction (fault_sites) and charge it without a walk from
 * then on. A walk that met a file without its table yet charged the frame
 * there as it is, for now: remembered, memset's faults stayed charged to
 * memset after libc's table came in.
 */
static __always_inline int walk_charges_leaf(const struct walk *w)
{
	return w->charged == 0 && !w->chain && !w->no_table;
}

/*
 * walk_start sets the walk up to start at a frame (pc, sp, bp) of the
 * process pid: charging from there, no frames kept, no outer_frame
 * question; the caller sets what differs.
 */
static __always_inline void walk_start(struct walk *w, __u64 pc, __u64 sp, __u64 bp, __u32 pid,
				       __u64 epoch, __u64 mm)
{
	w->pc = pc;
	w->sp = sp;
	w->bp = bp;
	w->charged_pc = pc;
	w->charged = 0;
	w->chain = 1;
	w->exact = 0;
	w->fault = 0;
	w->end = 0;
	w->leaf = pc;
	w->leaf_off = 0;
	w->memo = 0;
	w->no_table = 0;
	w->anon_code = 0;
	w->jit = 0;
	w->cached = 0;
	w->anon = ANON_NONE;
	w->outer_sp = 0;
	w->n = 0;
	w->limit = 0;
	w->pid = pid;
	w->epoch = epoch;
	w->mm = mm;
	w->xol = task_xol(bpf_get_current_task_btf());
}

/* What emit_site reports, and where the walk starts. */
struct site_args {
	__u64 addr, size, old_addr, old_size;
	__u64 pc, sp, bp; /* the registers the walk starts from */
	__u8 kind, func;
	__u8 exact;       /* pc is exact (a faulting instruction), not a return address */
	__u8 fault;       /* charge past libc's memory functions (ROW_MEMFN) */
	__u8 cat;         /* 1 + the JVM category, 0: none (jvm_category) */
};

/*
 * charges_itself reports whether a frame the cache holds is charged
 * itself when met where the walk charges: neither a wrapper nor unnamed.
 */
static __always_inline int charges_itself(const struct frame_info *fi)
{
	return !(fi->has_row && (fi->row.kind & (ROW_WRAPPER | ROW_ANON)));
}

/*
 * wrapped_caller returns the return address into a wrapper's caller (the
 * wrapper at a->pc, its row r) when the frame cache knows that caller
 * charged itself, else 0: the walk's first two steps, without the walk (a
 * wrapper's callers are many, and each comes back: 70% of node's
 * allocations). The walk's state in scratch is left as the walk would
 * leave it, for report_site's memo (remember_site), which keeps a
 * wrapper with an sp-based CFA only (w.memo).
 */
static __always_inline __u64 wrapped_caller(struct stack_record *rec, struct site_args *a, struct unwind_row *r,
					    __u64 id, __u64 epoch, __u64 mm)
{
	struct frame_info *fi;
	__s64 off = r->cfa_off;
	__u64 site, cfa;

	switch (r->kind & ROW_KIND_MASK) {
	case UNWIND_RSP:
		cfa = a->sp + off;
		break;
	case UNWIND_RBP:
		cfa = a->bp + off;
		break;
	default:
		return 0;
	}
	if (cfa <= a->sp || read_u64(&site, cfa - 8) || !site)
		return 0;
	rec->fk.pc = site - 1;
	fi = bpf_map_lookup_elem(&frame_cache, &rec->fk);
	if (!frames_valid(fi, epoch, mm) || !charges_itself(fi))
		return 0;
	rec->w.memo = (r->kind & ROW_KIND_MASK) == UNWIND_RSP && off > 0;
	rec->w.leaf = a->pc;
	rec->w.pid = id >> 32;
	rec->w.epoch = epoch;
	rec->w.mm = mm;
	rec->w.leaf_off = off;
	rec->w.charged_pc = site;
	return site;
}

/*
 * emit_site reports an event with its charged call site and, when stacks
 * are kept, its stack: the frame at pc is the leaf (the allocator's caller,
 * or the faulting instruction); the walk skips the wrapper chain above it
 * and, with stack_depth, records stack_depth frames from the charged one on.
 * A global function: the verifier checks it once, not at each of its
 * callers (each would walk the whole unwinder again). Returns 1 when the
 * frame cache found pc's frame charged itself, 2 when the walk found pc's
 * a wrapper with an sp-based CFA whose caller is charged itself (the
 * walk's state in scratch holds the offset and the caller): report_site
 * remembers either.
 */
__noinline int emit_site(struct site_args *a)
{
	struct stack_record *rec;
	struct walk *w;
	__u64 id = bpf_get_current_pid_tgid();
	__u64 epoch = frames_epoch(), mm = frames_mm();
	struct frame_info *fi;
	__u32 zero = 0, n, size_out, py = 0;
	int pyproc = py_process(id >> 32);
	__u64 site;

	if (!a)
		return 0;
	if (a->kind == KIND_FAULT)
		charge_page(id >> 32, a->addr); /* resident.h */
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec)
		return 0;
	if (!stack_depth && !a->exact && !pyproc) {
		/* A known caller that is neither a wrapper nor unnamed is charged: no walk. */
		rec->fk.pc = a->pc - 1;
		rec->fk.pid = id >> 32;
		rec->fk.pad = 0;
		fi = bpf_map_lookup_elem(&frame_cache, &rec->fk);
		site = 0;
		if (frames_valid(fi, epoch, mm)) {
			if (charges_itself(fi))
				site = a->pc;
			else if (fi->row.kind & ROW_WRAPPER)
				site = wrapped_caller(rec, a, &fi->row, id, epoch, mm);
		}
		if (site) {
			emit(&(struct emit_args){.kind = a->kind, .func = a->func, .addr = a->addr, .size = a->size,
						 .old_addr = a->old_addr, .old_size = a->old_size, .call_site = site,
						 .leaf = a->pc, .flags = a->cat << EVENT_CAT_SHIFT, .id = id});
			/* 1: charged itself; 2: a wrapper whose caller is (the memo in scratch) */
			return site == a->pc ? 1 : rec->w.memo ? 2 : 0;
		}
	}
	w = &rec->w;
	walk_start(w, a->pc, a->sp, a->bp, id >> 32, epoch, mm);
	w->exact = a->exact;
	w->fault = a->fault;
	if (stack_depth) {
		rec->frames[0] = w->pc | (a->exact ? FRAME_EXACT : 0);
		w->n = 1;
		w->limit = stack_depth; /* grows with the charged index */
	}
	bpf_loop(MAX_STACK + MAX_WRAPPER_FRAMES, walk_frame, 0, 0);
	/* Without stack_depth only JIT frames are kept (from the charged one). */
	n = stack_depth || w->jit ? w->n : 0;
	if (n > MAX_STACK + MAX_WRAPPER_FRAMES)
		n = MAX_STACK + MAX_WRAPPER_FRAMES;
	if (pyproc)
		py = py_walk(id >> 32, n);
	if (!stack_depth && !w->jit && !py) {
		emit(&(struct emit_args){.kind = a->kind, .func = a->func, .addr = a->addr, .size = a->size,
					 .old_addr = a->old_addr, .old_size = a->old_size,
					 .call_site = w->charged_pc & ~FRAME_EXACT, .leaf = a->pc,
					 .flags = a->cat << EVENT_CAT_SHIFT | (w->no_table ? EVENT_NO_TABLE : 0),
					 .id = id});
		return !pyproc && w->memo && w->leaf_off > 0 ? 2 : 0;
	}
	rec->e.time = 0;
	rec->e.addr = a->addr;
	rec->e.size = a->size;
	rec->e.old_addr = a->old_addr;
	rec->e.old_size = a->old_size;
	rec->e.call_site = w->charged_pc & ~FRAME_EXACT;
	rec->e.leaf = a->pc;
	rec->e.pid = id >> 32;
	rec->e.tid = (__u32)id;
	rec->e.kind = a->kind;
	rec->e.func = a->func;
	rec->e.flags = ((stack_depth || w->jit) && w->end == STEP_END ? EVENT_STACK_COMPLETE : 0) |
		       a->cat << EVENT_CAT_SHIFT | (w->no_table ? EVENT_NO_TABLE : 0);
	/* JIT frames are kept from the charged one; without stack_depth none is. */
	rec->e.charged = stack_depth && !w->jit ? w->charged : 0;
	/* With Python frames after the native ones: how many (python.h). */
	rec->e.stack_id = py ? py : -1;
	if (py > MAX_PY_FRAMES)
		py = MAX_PY_FRAMES;
	size_out = sizeof(struct event) + (n + 2 * py) * sizeof(__u64);
	barrier_var(size_out);
	if (size_out > sizeof(struct event) + PY_WORDS * sizeof(__u64))
		return 0;
	if (bpf_ringbuf_output(&events, rec, size_out, wake_flags()))
		count_lost(id >> 32);
	return 0;
}

/*
 * outer_frame walks the stack of an anonymous mmap returning now, entered
 * below a call whose return a session skipped (s->outer_sp, in_outer), up
 * to the frame entered at that call's sp: whether that frame still runs
 * the skipped call's code (enum outer_frame_answer). An mmap called from
 * outside the skipped function's file is the program's without a walk:
 * glibc, jemalloc, tcmalloc and mimalloc map from their own code. A
 * global function, as emit_site; the walk keeps no frames and emits
 * nothing.
 */
__noinline int outer_frame(struct pt_regs *ctx, struct inflight *s)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct vma_found v = {};
	struct stack_record *rec;
	struct unwind_file *f;
	struct walk *w;
	__u32 zero = 0, pid = bpf_get_current_pid_tgid() >> 32;
	__u64 pc;

	if (!ctx || !s)
		return OUTER_FRAME_UNKNOWN;
	v.addr = s->ip;
	if (bpf_find_vma(t, s->ip, vma_file, &v, 0) || v.found != VMA_FILE)
		return OUTER_FRAME_UNKNOWN;
	pc = PT_REGS_IP(ctx);
	if (pc <= v.start || pc > v.end)
		return OUTER_FRAME_OTHER;
	f = bpf_map_lookup_elem(&unwind_files, &v.key);
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec)
		return OUTER_FRAME_UNKNOWN;
	w = &rec->w;
	walk_start(w, pc, PT_REGS_SP(ctx), PT_REGS_FP(ctx), pid, frames_epoch(), frames_mm());
	w->outer = OUTER_FRAME_UNKNOWN;
	w->outer_sp = s->outer_sp;
	w->outer_lo = s->ip;
	w->outer_hi = s->code_end;
	w->outer_map_lo = v.start;
	w->outer_map_hi = v.end;
	w->outer_file = f ? f->flags : 0;
	bpf_loop(MAX_CHAIN_FRAMES + 1, walk_frame, 0, 0);
	/* The per-CPU scratch: a walk that preempted this one answers nothing. */
	if (w->outer_sp != s->outer_sp || w->pid != pid)
		return OUTER_FRAME_UNKNOWN;
	w->outer_sp = 0;
	return w->outer;
}

/* mt_file_key's context: an address of the caller's, and what maps it. */
struct file_key_query {
	__u64 addr;
	struct file_key key;
	__u64 found;
};

#endif
