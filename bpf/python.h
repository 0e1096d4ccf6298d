/*
 * Python frames: the CPython frames of the thread an event is charged in,
 * read where a native stack is (emit_site: exact call sites, sampled
 * allocations, sampled page faults), never on free.
 *
 * Provides: struct py_proc (tracer's pythonProc fills py_procs per
 * process), py_walk(), which appends (code object, instruction) pairs to a
 * stack record's frames, py_code_freed() for the code_dealloc probe, and
 * MAX_PY_FRAMES.
 * Needs: struct stack_record and its scratch map (unwind.h), vmlinux.h.
 *
 * A thread's PyThreadState is its gilstate TSS key's value: the key sits
 * in _PyRuntime (autoTSSkey), the value in glibc's pthread-specific block
 * in the thread's TCB (fsbase). It is set for as long as the thread is
 * bound to the interpreter, whether or not it holds the GIL, so a thread
 * that released the GIL in C code keeps its Python stack. From the thread
 * state, one read per frame: the whole frame head (PY_FRAME_READ bytes:
 * one bpf_probe_read_user costs the same up to 128 bytes), from which the
 * code object, the previous frame and the instruction are taken.
 *
 * Each code object also carries a 16-bit tag beside its address: its
 * co_filename and co_name pointers, folded. The names are read in user
 * space later, and a code object freed by then (a module's or a class
 * body's, at start-up) may have been replaced at the same address: the
 * tag tells the one the event ran from another. The tag is read once per
 * code object and kept in py_tags, until the code object is freed: the
 * probe on code_dealloc (FUNC_PY_CODE_FREE, reached only through
 * PyCode_Type's tp_dealloc, so never inlined away) forgets it, and tells
 * user space in the ring, after every event that carried it. The next
 * code object at the address often has its names' strings where the last
 * one's were, so a kept tag also folds in co_name's length and first
 * characters (one read more, once per code object): user space, reading
 * late, tells the new object from the one an event ran. A frame
 * holds a strong reference to its code object, so no code object in a
 * walked chain can be freed while its tag is read or used. Where that
 * probe is not placed (the whole host's resident mode), the process has
 * no cache generation and every frame reads its tag: two reads a frame.
 */
#ifndef MEMTRACE_PYTHON_H
#define MEMTRACE_PYTHON_H

enum py_limits {
	PY_FRAME_READ = 128, /* bytes of a frame read: every offset below is inside */
	PY_STR_READ = 72, /* bytes of co_name read from its length on: its first 16 bytes of characters are inside */
	PY_SPECIFIC_KEYS = 32, /* glibc's specific_1stblock: keys past it are not read */
};

/*
 * One Python process's layout (python/ in Go finds it per minor version).
 * In the stack record, each Python frame is two words: its code object in
 * bits 0-47 and its tag (py_tag) in bits 48-63, then its instruction (3.11+: the instruction pointer; 3.10: f_lasti in
 * the low 32 bits) in bits 0-47 and the frame's entry byte (3.11:
 * is_entry; 3.12+: owner) in bits 48-55.
 */
/* The thread's TCB: x86-64's fsbase (a CO-RE flavor of task_struct). */
struct thread_struct___py {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct task_struct___py {
	struct thread_struct___py thread;
} __attribute__((preserve_access_index));

struct py_proc {
	__u64 tss_key;      /* address of autoTSSkey in _PyRuntime: Py_tss_t {int initialized; unsigned key} */
	__u32 tsd_off;      /* offset of glibc's specific_1stblock in its struct pthread (at fsbase) */
	__u32 tstate_frame; /* offset in PyThreadState of the frame (3.10, 3.13) or of the cframe */
	__s32 cframe_frame; /* offset of the current frame in the cframe; -1: no cframe */
	__u32 code_off;     /* offsets in a frame, 8-aligned, below PY_FRAME_READ */
	__u32 prev_off;
	__u32 instr_off;
	__u32 entry_off;    /* below PY_FRAME_READ; 0: none */
	__u32 names_off;    /* offset in a code object of co_filename, co_name after it; 0: no tag */
	__u32 gen;          /* the process's py_tags generation; 0: no cache (code_dealloc not probed) */
	__u32 ascii_off;    /* where a compact ASCII str's characters start; 0: co_name's not in the tag */
	__u32 compact_off;  /* where another compact str's start (at most PY_STR_READ) */
};

/*
 * A cached tag's key: the generation tells a process from an earlier one
 * with the same PID (or the same process before an exec), so that
 * stale entries are never met, only evicted.
 */
struct py_code_key {
	__u32 gen;
	__u32 pad;
	__u64 code;
};

/*
 * Each code object's tag (py_tag), read once; code_dealloc forgets it.
 * Preallocated (~1.2 MB of the kernel's); one evicted is read again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct py_code_key);
	__type(value, __u64);
} py_tags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* pid */
	__type(value, struct py_proc);
} py_procs SEC(".maps");

/* The walk's state and the frame being read, per CPU. */
struct py_state {
	struct py_proc p;
	/* The TSS key and the thread state: read here, off the stack (the
	 * return program's call chain is near 6.1's 512 bytes). */
	__u32 tss[2];
	__u64 tstate;
	__u64 frame;
	__u32 at; /* the next free index in the stack record's frames */
	__u32 n;  /* Python frames recorded */
	__u64 names[2]; /* the code object's co_filename and co_name */
	struct py_code_key key;
	__u64 tag;
	__u8 buf[PY_FRAME_READ];
	__u8 str[PY_STR_READ]; /* co_name from its length on (py_name_tag) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_state);
} py_scratch SEC(".maps");

#define PY_WORD_MASK ((1ULL << 48) - 1)

/* py_tag folds a code object's co_filename and co_name pointers into 16 bits (symbolize.PythonTag in Go). */
static __always_inline __u64 py_tag(__u64 file, __u64 name)
{
	__u64 h = (file ^ name * 0x9e3779b97f4a7c15ULL) * 0xff51afd7ed558ccdULL;

	return h >> 48;
}

/*
 * py_name_tag folds co_name's length and first 16 bytes of characters in
 * too (symbolize.PythonNameTag in Go): s holds the str object from its
 * length on. All of it is fixed for the str's life; the bytes past its
 * characters are not, and are masked.
 */
static __always_inline __u64 py_name_tag(__u64 file, __u64 name, const __u8 *s, __u32 ascii_off, __u32 compact_off)
{
	__u64 len = *(__u64 *)s, state = *(__u32 *)(s + 16), w0, w1, n;
	__u32 off = ((state & 0x40) ? ascii_off : compact_off) - 16;

	off &= 0x38;
	w0 = *(__u64 *)(s + off);
	w1 = *(__u64 *)(s + off + 8);
	n = len * (state >> 2 & 7); /* bytes: characters times their kind */
	if (n < 16)
		w1 &= n > 8 ? (1ULL << (8 * (n - 8))) - 1 : 0;
	if (n < 8)
		w0 &= (1ULL << (8 * n)) - 1;
	return ((file ^ name * 0x9e3779b97f4a7c15ULL ^ len * 0xc2b2ae3d27d4eb4fULL ^ w0 * 0x165667b19e3779f9ULL ^
		 w1 * 0x85ebca77c2b2ae63ULL) * 0xff51afd7ed558ccdULL) >> 48;
}

/*
 * py_code_tag is code's tag: from py_tags, else read (and kept, where the
 * process has a generation). 0 when the names cannot be read.
 */
static __always_inline __u64 py_code_tag(struct py_state *ps, __u64 code)
{
	__u64 *cached;

	ps->key.gen = ps->p.gen;
	ps->key.pad = 0;
	ps->key.code = code;
	if (ps->p.gen) {
		cached = bpf_map_lookup_elem(&py_tags, &ps->key);
		if (cached)
			return *cached;
	}
	if (bpf_probe_read_user(ps->names, sizeof(ps->names), (void *)(code + ps->p.names_off)))
		return 0;
	ps->tag = py_tag(ps->names[0], ps->names[1]);
	if (ps->p.ascii_off) {
		/* Kept until the free: co_name's characters too, one read more. */
		if (bpf_probe_read_user(ps->str, sizeof(ps->str), (void *)(ps->names[1] + 16)))
			return 0;
		ps->tag = py_name_tag(ps->names[0], ps->names[1], ps->str, ps->p.ascii_off, ps->p.compact_off);
	}
	if (ps->p.gen)
		bpf_map_update_elem(&py_tags, &ps->key, &ps->tag, BPF_ANY);
	return ps->tag;
}

/*
 * py_code_freed forgets the tag of pid's code object at code (code_dealloc's
 * probe), and says whether one was kept: then events in the ring may carry
 * it, and user space must learn of the free (KIND_PY_CODE_FREED).
 */
static __always_inline int py_code_freed(__u32 pid, __u64 code)
{
	struct py_code_key key = {.code = code};
	struct py_proc *p;

	p = bpf_map_lookup_elem(&py_procs, &pid);
	if (!p || !p->gen)
		return 0;
	key.gen = p->gen;
	return bpf_map_delete_elem(&py_tags, &key) == 0;
}

/* py_step records one frame and moves to the previous one (bpf_loop's callback). */
static long py_step(__u64 i, void *unused)
{
	struct stack_record *rec;
	struct py_state *ps;
	__u32 zero = 0, at, next;
	__u64 code, instr, entry = 0;

	rec = bpf_map_lookup_elem(&scratch, &zero);
	ps = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!rec || !ps || !ps->frame)
		return 1;
	if (bpf_probe_read_user(ps->buf, sizeof(ps->buf), (void *)ps->frame))
		return 1;
	code = *(__u64 *)&ps->buf[ps->p.code_off & (PY_FRAME_READ - 8)];
	instr = *(__u64 *)&ps->buf[ps->p.instr_off & (PY_FRAME_READ - 8)];
	if (ps->p.entry_off)
		entry = ps->buf[ps->p.entry_off & (PY_FRAME_READ - 1)];
	at = ps->at;
	if (!code || at > PY_WORDS - 2)
		return 1;
	code &= PY_WORD_MASK;
	if (ps->p.names_off)
		code |= py_code_tag(ps, code) << 48;
	/*
	 * Masked: 6.1's verifier loses the bound checked above, and the
	 * barriers keep clang from dropping the masks it implies. at may be
	 * odd (after an odd number of native frames).
	 */
	next = at + 1;
	barrier_var(at);
	barrier_var(next);
	rec->frames[at & (STACK_WORDS - 1)] = code;
	rec->frames[next & (STACK_WORDS - 1)] = (instr & PY_WORD_MASK) | entry << 48;
	ps->at = at + 2;
	ps->n++;
	ps->frame = *(__u64 *)&ps->buf[ps->p.prev_off & (PY_FRAME_READ - 8)];
	return 0;
}

/*
 * py_walk appends the current thread's Python frames, innermost first, to
 * the stack record's frames from index at, and returns how many it
 * appended (0 for a process not known to run Python, or a thread bound to
 * no interpreter).
 */
static __always_inline __u32 py_walk(__u32 pid, __u32 at)
{
	struct task_struct___py *t = (void *)bpf_get_current_task_btf();
	struct py_state *ps;
	struct py_proc *p;
	__u32 zero = 0;
	__u64 fsbase;

	p = bpf_map_lookup_elem(&py_procs, &pid);
	if (!p)
		return 0;
	ps = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!ps)
		return 0;
	ps->p = *p;
	if (bpf_probe_read_user(ps->tss, sizeof(ps->tss), (void *)ps->p.tss_key) || !ps->tss[0] ||
	    ps->tss[1] >= PY_SPECIFIC_KEYS)
		return 0;
	fsbase = BPF_CORE_READ(t, thread.fsbase);
	if (bpf_probe_read_user(&ps->tstate, sizeof(ps->tstate), (void *)(fsbase + ps->p.tsd_off + 16 * ps->tss[1] + 8)) ||
	    !ps->tstate)
		return 0;
	if (bpf_probe_read_user(&ps->frame, sizeof(ps->frame), (void *)(ps->tstate + ps->p.tstate_frame)) || !ps->frame)
		return 0;
	if (ps->p.cframe_frame >= 0 &&
	    (bpf_probe_read_user(&ps->frame, sizeof(ps->frame), (void *)(ps->frame + ps->p.cframe_frame)) || !ps->frame))
		return 0;
	ps->at = at;
	ps->n = 0;
	bpf_loop(MAX_PY_FRAMES, py_step, 0, 0);
	return ps->n;
}

/* py_process reports whether pid's Python frames are read. */
static __always_inline int py_process(__u32 pid)
{
	return bpf_map_lookup_elem(&py_procs, &pid) != 0;
}

#endif
