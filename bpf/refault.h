/*
 * Refaults, included by memtrace.bpf.c before the walk (which charges the
 * pages it reports: charge_page). The slot's hash stands alone
 * (REFAULT_INDEX_ONLY), so that the test programs check the probes' own
 * hash against user space's (tracer.refaultSlot).
 */
/*
 * Provides: refault_index (alone with REFAULT_INDEX_ONLY); otherwise also
 * the refault_slots map, refault_slot_bits, refault_slot_of, charge_page.
 * Needs: nothing but the BPF helpers (included here).
 */
#ifndef MEMTRACE_REFAULT_H
#define MEMTRACE_REFAULT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The slots of refault_slots at most: 2^22 (32 MiB; tracer.refaultBits). */
#define REFAULT_SLOT_BITS_MAX 22

/*
 * refault_index: the slot of process tgid's page at addr among 2^bits. The pages of a
 * 2 MiB region take consecutive slots from a hash of the region and the
 * process: faults come mostly in address order, and so then do their
 * lookups, a cache line for 8 pages (a hash of each page cost a cache
 * miss a fault: faults.c 1.24x untraced against 1.12x, measured).
 */
static __always_inline __u32 refault_index(__u32 tgid, __u64 addr, __u32 bits)
{
	__u64 region = (((addr >> 21) ^ ((__u64)tgid << 40)) * 0x9E3779B97F4A7C15ULL) >> (64 - bits);

	return (region + ((addr >> 12) & 511)) & ((1U << bits) - 1);
}

#ifndef REFAULT_INDEX_ONLY

/*
 * Released, then faulted again: a sampled page unmapped or released
 * (munmap, madvise) and written again before user space's next pagemap
 * check is resident again, but no longer by the sampled fault: left
 * charged, a process that churns its mappings at the same addresses
 * would be charged each address as if any of its faults had been sampled
 * (measured: ~1.6x RssAnon). Every fault that makes anonymous memory
 * resident therefore looks up its page's slot here: a slot counts the
 * samples the probes charged to pages that hash to it, and, written by
 * user space alone (the array is mmapped), those that left its table.
 * When they differ a sampled page may be there, and the fault tells user
 * space (KIND_REFAULT), which uncharges it if it is; a huge page's fault
 * always tells. One inlined array lookup a fault; other processes' pages
 * that share a slot cost a record, which user space drops.
 */
struct refault_slot {
	__u32 charged;   /* samples charged to this slot's pages (the probes) */
	__u32 uncharged; /* of them, those user space uncharged since */
};

/*
 * log2 of refault_slots' size, set by the loader from the machine's memory
 * and the sampling mean (tracer.refaultBits), with max_entries.
 */
const volatile __u32 refault_slot_bits = 20;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, struct refault_slot);
} refault_slots SEC(".maps");

/* refault_slot_of: the slot of the page at addr of process tgid. */
static __always_inline struct refault_slot *refault_slot_of(__u32 tgid, __u64 addr)
{
	__u32 i = refault_index(tgid, addr, refault_slot_bits);

	return bpf_map_lookup_elem(&refault_slots, &i);
}

/*
 * charge_page counts a sample of the page at addr going out (emit_site
 * counts those it writes: the fault programs' stacks stay as they were,
 * which 6.1's verifier counts with the walk's).
 */
static __always_inline void charge_page(__u32 tgid, __u64 addr)
{
	struct refault_slot *r = refault_slot_of(tgid, addr);

	if (r)
		__sync_fetch_and_add(&r->charged, 1);
}

#endif /* REFAULT_INDEX_ONLY */

#endif
