//go:build ignore

/*
 * Unit tests of the stack walk (unwind.h), of the Python frame walk
 * (python.h) and of the refault slots that the resident probes charge
 * and look up (refault.h, resident.h), run through
 * BPF_PROG_TEST_RUN on known inputs: a synthetic stack in the test's own
 * memory, walked with unwind rows the test writes for a file it maps; and
 * pages charged and told again. The file includes memtrace.bpf.c whole, so
 * that the code tested is the probes' own, with their maps and constants;
 * a test loads only the programs below and the maps they use
 * (tracer/bpf_unwind_test.go), none of the probes.
 */
#include "memtrace.bpf.c"

/* What a walk starts from and, on return, what it found. */
struct walk_test {
	__u64 pc, sp, bp;  /* in: the first frame (pc a return address unless exact) */
	__u8 exact, fault; /* in: as struct site_args */
	__u8 end;          /* out: STEP_END (complete) or STEP_STOP (truncated) */
	__u8 chain;        /* out: no frame outside the wrapper chain was met */
	__u32 n;           /* out: frames kept */
	__u32 charged;     /* out: the charged frame's index */
	__u8 no_table;     /* out: a frame's file had no table yet (EVENT_NO_TABLE) */
	__u8 remembered;   /* out: a fault's walk like this one is remembered (walk_charges_leaf) */
	__u8 memo;         /* out: the walk's memo (a wrapper leaf's charged caller, for report_site) */
	__u64 charged_pc;  /* out */
	__s64 told;        /* out: bytes the walk wrote into the ring (a table asked for) */
};

/* The frames the last walk kept (a context's fields are written one by one only). */
struct walk_frames {
	__u64 frames[MAX_STACK + MAX_WRAPPER_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_frames);
} walk_frames SEC(".maps");

/*
 * mt_test_walk walks the stack t describes as emit_site does with
 * stack_depth frames kept (set by the test), without the frame cache; the
 * frames kept go to walk_frames.
 */
SEC("syscall")
int mt_test_walk(struct walk_test *t)
{
	__u64 before = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	struct stack_record *rec;
	struct walk_frames *out;
	struct walk *w;
	__u32 zero = 0;

	rec = bpf_map_lookup_elem(&scratch, &zero);
	out = bpf_map_lookup_elem(&walk_frames, &zero);
	if (!rec || !out)
		return 1;
	w = &rec->w;
	walk_start(w, t->pc, t->sp, t->bp, bpf_get_current_pid_tgid() >> 32, 0, 0);
	w->exact = t->exact;
	w->fault = t->fault;
	rec->frames[0] = w->pc | (t->exact ? FRAME_EXACT : 0);
	w->n = 1;
	w->limit = stack_depth;
	bpf_loop(MAX_STACK + MAX_WRAPPER_FRAMES, walk_frame, 0, 0);
	t->end = w->end;
	t->chain = w->chain;
	t->n = w->n;
	t->charged = w->charged;
	t->charged_pc = w->charged_pc;
	t->no_table = w->no_table;
	t->remembered = walk_charges_leaf(w);
	t->memo = w->memo;
	bpf_probe_read_kernel(out, sizeof(*out), rec->frames);
	t->told = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) - before;
	return 0;
}

/* What emit_site is given and, on return, what it answered. */
struct site_test {
	__u64 pc, sp, bp; /* in: the allocation's return address and registers */
	__s32 known;      /* out: emit_site's answer (remember_site's known) */
	__u8 walked;      /* out: the walk ran */
	__u8 pad[3];
	__u64 charged_pc; /* out: the charged frame's pc, as left in the walk's state */
};

/*
 * mt_test_site reports an allocation from t's registers through emit_site
 * (without stacks: the test loads it with stack_depth 0), with the frame
 * cache of the current epoch (frame_epoch, set by the test).
 */
SEC("syscall")
int mt_test_site(struct site_test *t)
{
	struct stack_record *rec;
	struct site_args *a;
	__u32 zero = 0;

	a = bpf_map_lookup_elem(&site_scratch, &zero);
	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!a || !rec)
		return 1;
	*a = (struct site_args){.addr = 0x10000, .size = 16, .pc = t->pc, .sp = t->sp, .bp = t->bp,
				.kind = KIND_ALLOC, .func = FUNC_MALLOC};
	rec->w.end = 0xff;
	rec->w.charged_pc = 0;
	t->known = emit_site(a);
	t->walked = rec->w.end != 0xff;
	t->charged_pc = rec->w.charged_pc;
	return 0;
}

/* A page charged, or made resident again by a fault not sampled. */
struct refault_test {
	__u64 addr, size;
	__u32 tgid;
	__u8 charge; /* in: charge the page (a sample of it went out), else tell its refault */
	__s64 told;  /* out: bytes written into the ring (a refault record) */
};

/* mt_test_refault charges a page (charge_page) or tells its refault (tell_refault). */
SEC("syscall")
int mt_test_refault(struct refault_test *t)
{
	__u64 before = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	if (t->charge)
		charge_page(t->tgid, t->addr);
	else
		tell_refault(t->tgid, t->addr, t->size);
	t->told = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) - before;
	return 0;
}

/* A Python frame chain to walk (python.h) and, on return, what was kept. */
struct py_walk_test {
	__u64 frame;                                  /* in: the innermost frame */
	__u32 code_off, prev_off, instr_off, entry_off; /* in: as struct py_proc */
	__u32 names_off;                              /* in: 0: no tag */
	__u32 gen;                                    /* in: the tags' cache generation; 0: none */
	__u32 n;                                      /* out: Python frames kept */
	__u64 freed;                                  /* in: a code object freed before the walk; 0: none */
	__u32 ascii_off, compact_off;                 /* in: as struct py_proc */
};

/*
 * mt_test_py_walk walks a Python frame chain from t->frame as py_walk does
 * once it has the thread's frame, after forgetting t->freed's tag as the
 * code_dealloc probe does; the words kept go to walk_frames.
 */
SEC("syscall")
int mt_test_py_walk(struct py_walk_test *t)
{
	struct stack_record *rec;
	struct walk_frames *out;
	struct py_state *ps;
	__u32 zero = 0;

	rec = bpf_map_lookup_elem(&scratch, &zero);
	out = bpf_map_lookup_elem(&walk_frames, &zero);
	ps = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!rec || !out || !ps)
		return 1;
	__builtin_memset(&ps->p, 0, sizeof(ps->p));
	ps->p.code_off = t->code_off;
	ps->p.prev_off = t->prev_off;
	ps->p.instr_off = t->instr_off;
	ps->p.entry_off = t->entry_off;
	ps->p.names_off = t->names_off;
	ps->p.gen = t->gen;
	ps->p.ascii_off = t->ascii_off;
	ps->p.compact_off = t->compact_off;
	if (t->freed) {
		/* as py_code_freed, for a process whose generation is t->gen */
		ps->key.gen = t->gen;
		ps->key.pad = 0;
		ps->key.code = t->freed;
		bpf_map_delete_elem(&py_tags, &ps->key);
	}
	ps->frame = t->frame;
	ps->at = 0;
	ps->n = 0;
	bpf_loop(MAX_PY_FRAMES, py_step, 0, 0);
	t->n = ps->n;
	bpf_probe_read_kernel(out, sizeof(*out), rec->frames);
	return 0;
}
